"""Verification is counterfactual: a candidate is tried on the tasks it is retrieved for,
each paired with the same task without it; it is validated when it helped more than it
hurt, refuted when it hurt more, and its validity keeps the evidence. Only the visible
checks decide."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mulligan.runs.runner import episode_id
from mulligan.schema import ExactMatchCheck
from mulligan.studies.verify import WITHOUT, verify
from mulligan.testing import ScriptedModel
from tests.memory.helpers import (
    RIGHT,
    WRONG,
    fresh,
    one_trial,
    plant,
    prompt_of,
    units_model,
    units_tasks,
)


def test_a_lesson_that_helps_in_its_pairs_is_validated_with_its_evidence(
    tmp_path: Path,
) -> None:
    memory = fresh(tmp_path)
    lesson = plant(memory, "rule", RIGHT)
    tasks = units_tasks(3)
    model = units_model(right_when=RIGHT)
    found = verify(
        memory, [lesson], tasks, one_trial(model, memory), "v1", k=3, min_similarity=0.0, pairs=2
    )
    assert found.tried == {"rule": ["units-1", "units-2"]}  # k pairs, in the order given
    assert found.changed == {"rule": "validated"}
    v = memory.lessons(["rule"])[0].validity
    assert v.status == "validated"
    assert (v.evidence.pairs, v.evidence.helped, v.evidence.hurt) == (2, 2, 0)
    assert v.evidence.tasks == ["units-1", "units-2"]
    assert memory.store.get(["rule"])[0].validity == v  # the store's cache says the same
    with_id, without_id = (episode_id("v1", arm, "units-1") for arm in ("with-rule", WITHOUT))
    with_, without = memory.log.episode(with_id), memory.log.episode(without_id)
    assert with_ is not None and with_.attempts[0].lesson_ids == ["rule"] and with_.passed
    assert without is not None and without.attempts[0].lesson_ids == [] and not without.passed
    events = [e for e in memory.log.lesson_events("rule") if e["event"] == "verified"]
    assert [e["detail"] for e in events] == [
        "units-1: helped (with True, without False)",
        "units-2: helped (with True, without False)",
    ]
    # a resumed verification counts no pair twice
    again = verify(
        memory, [lesson], tasks, one_trial(model, memory), "v1", k=3, min_similarity=0.0, pairs=2
    )
    assert again.tried == {} and memory.lessons(["rule"])[0].validity.evidence.pairs == 2


def test_a_verification_that_hurts_refutes_the_lesson(tmp_path: Path) -> None:
    memory = fresh(tmp_path)
    lesson = plant(memory, "bad", WRONG)
    model = units_model(right_when=None, wrong_when=WRONG)  # right unless misled
    verify(
        memory, [lesson], units_tasks(2), one_trial(model, memory), "v1",
        k=3, min_similarity=0.0, pairs=3,
    )  # fmt: skip
    v = memory.lessons(["bad"])[0].validity
    assert v.status == "refuted"
    assert (v.evidence.pairs, v.evidence.helped, v.evidence.hurt) == (2, 0, 2)
    events = [e["event"] for e in memory.log.lesson_events("bad")]
    assert events.count("status:refuted") == 1
    assert memory.retrieve(units_tasks(1)[0], 3) == []  # refuted: retrieved for no task


def test_a_lesson_that_changes_nothing_stays_a_candidate(tmp_path: Path) -> None:
    memory = fresh(tmp_path)
    lesson = plant(memory, "idle", "Read the question.")
    model = units_model(right_when=None)  # right with or without it
    verify(
        memory, [lesson], units_tasks(2), one_trial(model, memory), "v1",
        k=3, min_similarity=0.0, pairs=3,
    )  # fmt: skip
    v = memory.lessons(["idle"])[0].validity
    assert (v.status, v.evidence.pairs, v.evidence.helped, v.evidence.hurt) == (
        "candidate", 2, 0, 0,
    )  # fmt: skip


def test_pairs_skip_the_lesson_s_own_task_and_only_visible_checks_decide(tmp_path: Path) -> None:
    memory = fresh(tmp_path)
    lesson = plant(memory, "rule", RIGHT)
    lesson.source.task_id = "units-1"  # written on units-1: not evidence for itself
    memory.store.put([lesson])
    memory.log.log_lesson(lesson, stored=True)
    tasks = units_tasks(2)
    hidden_only = tasks[1].model_copy(
        update={"checks": [ExactMatchCheck(answer="2000", visibility="hidden")]}
    )
    model = units_model(right_when=RIGHT)
    found = verify(
        memory, [memory.lessons(["rule"])[0]], [tasks[0], hidden_only],
        one_trial(model, memory), "v1", k=3, min_similarity=0.0, pairs=3,
    )  # fmt: skip
    assert found.tried == {"rule": ["units-2"]}
    v = memory.lessons(["rule"])[0].validity  # the hidden check passed with it: no evidence
    assert (v.status, v.evidence.pairs) == ("candidate", 0)


def _mixed_model(hurt_on: int) -> ScriptedModel:
    """With the lesson ("Mixed advice."): right on every task but `hurt_on`; without it:
    right on `hurt_on` only. So the lesson hurts in that pair and helps in the other."""

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        text = prompt_of(messages)
        km = int(text.split("A path is ")[1].split(" km")[0])
        right = (km != hurt_on) if "Mixed advice." in text else (km == hurt_on)
        return str(km * 1000) if right else str(km)

    return ScriptedModel(policy=policy)


@pytest.mark.parametrize("hurt_on", [1, 2], ids=["hurt-first", "helped-first"])
def test_the_status_follows_all_the_pairs_whatever_their_order(
    tmp_path: Path, hurt_on: int
) -> None:
    """One pair hurt, one helped: a tie, so the lesson stays a candidate, whichever pair came
    first (a first pair that hurt once refuted it for good, though the evidence was even)."""
    memory = fresh(tmp_path)
    lesson = plant(memory, "mixed", "Mixed advice.")
    verify(
        memory, [lesson], units_tasks(2), one_trial(_mixed_model(hurt_on), memory), "v1",
        k=3, min_similarity=0.0, pairs=2,
    )  # fmt: skip
    v = memory.lessons(["mixed"])[0].validity
    assert (v.evidence.pairs, v.evidence.helped, v.evidence.hurt) == (2, 1, 1)
    assert v.status == "candidate"
    events = [e["event"] for e in memory.log.lesson_events("mixed")]
    assert not [e for e in events if e.startswith("status:")]
