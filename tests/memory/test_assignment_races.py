"""Verification while working against what happens beside an attempt: the candidate settled
or retracted by another process while an attempt assigned to it is under way, or before a
crashed one is resumed. A lesson settled makes no more pairs (the by-chance figures assume
the count stops there); a validated lesson is shown, a refuted or retracted one is not,
whatever arm the attempt was assigned before."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.lesson_log import to_status
from mulligan.runs.build import build_loop
from mulligan.schema import Episode, Task
from mulligan.testing import ScriptedModel
from tests.memory.helpers import DIAGNOSIS, RIGHT, plant, prompt_of, units_tasks
from tests.memory.test_assignment_crashes import Crash, once

SETTLED = ["validated", "refuted", "retracted"]


def elsewhere(memory_dir: Path, status: str) -> None:
    """Another process on the same memory settles (or its user retracts) the candidate."""
    other = Memory(memory_dir, HashEmbedding())
    if status == "retracted":
        assert other.retract("rule")
    else:
        other.change(other.lessons(["rule"]), f"status:{status}", to_status(status))  # type: ignore[arg-type]


def failing_model(hook: Callable[[str], None] = lambda text: None) -> ScriptedModel:
    """Never right; `hook(prompt)` runs before each actor reply."""

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        if "You review a failed attempt" in messages[0]["content"]:
            return json.dumps({"diagnosis": DIAGNOSIS, "lesson": ""})
        text = prompt_of(messages)
        hook(text)
        return text.split("A path is ")[1].split(" km")[0]

    return ScriptedModel(policy=policy)


def episode(memory_dir: Path, model: ScriptedModel, task: Task, trials: int = 3) -> Episode:
    memory = Memory(memory_dir, HashEmbedding())
    settings = LoopSettings(strategy="reflexion-memory", trials=trials, min_similarity=0.0)
    return build_loop(model, settings, memory=memory).run_episode(task, episode_id=f"e-{task.id}")


@pytest.mark.parametrize("status", SETTLED)
def test_a_lesson_settled_elsewhere_while_its_attempt_runs_makes_no_more_pairs(
    tmp_path: Path, status: str
) -> None:
    undisturbed, settled = tmp_path / "undisturbed", tmp_path / "settled"
    plant(Memory(undisturbed, HashEmbedding()), "rule", RIGHT)
    first, second = units_tasks(2)
    episode(undisturbed, failing_model(), first)  # the first half of each block
    episode(undisturbed, failing_model(), second)  # the other halves: a pair at trials 2 and 3
    memory = Memory(undisturbed, HashEmbedding())
    assert memory.lessons(["rule"])[0].validity.evidence.pairs == 2  # as it runs undisturbed

    plant(Memory(settled, HashEmbedding()), "rule", RIGHT)
    episode(settled, failing_model(), first)
    fired: list[bool] = []

    def settle_while_trial_2_runs(text: str) -> None:
        if DIAGNOSIS in text and not fired:
            fired.append(True)
            elsewhere(settled, status)

    episode(settled, failing_model(settle_while_trial_2_runs), second)
    memory = Memory(settled, HashEmbedding())
    v = memory.lessons(["rule"])[0].validity
    assert v.status == status
    assert v.evidence.pairs == 0  # the half judged after it was settled pairs with none
    assert "verified" not in [e["event"] for e in memory.log.lesson_events("rule")]
    judged = memory.assignment(f"e-{second.id}", 2)
    assert judged is not None and judged.told and judged.pair is None  # its outcome kept


@pytest.mark.parametrize("status", SETTLED)
def test_a_resumed_attempt_is_shown_the_lesson_as_its_status_now_says(
    tmp_path: Path, status: str
) -> None:
    """Killed while shown the candidate; settled elsewhere; resumed: it keeps its arm in the
    log, is shown a validated lesson (as every attempt is), never a refuted or retracted one,
    and its half makes no pair. (A validated lesson retrieved at its first start, so the
    resumed attempt is given what that start retrieved, not a search made afresh.)"""
    mem = tmp_path / "mem"
    plant(Memory(mem, HashEmbedding()), "rule", RIGHT)
    plant(
        Memory(mem, HashEmbedding()), "proven", "Read the question to its end.", status="validated"
    )
    tasks = units_tasks(2)
    crash = once(lambda text: RIGHT in text)  # the first attempt shown the candidate
    killed = None
    for task in tasks:
        try:
            episode(mem, failing_model(crash), task)
        except Crash:
            killed = task
            break
    assert killed is not None
    elsewhere(mem, status)
    model = failing_model()
    resumed = episode(mem, model, killed)
    memory = Memory(mem, HashEmbedding())
    arm = memory.assignment(resumed.id, 2)
    assert arm is not None and arm.shown  # kept
    assert ("rule" in resumed.attempts[1].lesson_ids) == (status == "validated")
    assert (RIGHT in prompt_of(model.calls[0].messages)) == (status == "validated")
    assert memory.lessons(["rule"])[0].validity.evidence.pairs == 0


def test_a_run_of_one_trial_assigns_nothing_and_shows_no_candidate(tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    plant(Memory(mem, HashEmbedding()), "rule", RIGHT)
    model = failing_model()
    episodes = [episode(mem, model, task, trials=1) for task in units_tasks(4)]
    memory = Memory(mem, HashEmbedding())
    assert all(len(e.attempts) == 1 and not e.attempts[0].lesson_ids for e in episodes)
    assert not any(RIGHT in prompt_of(call.messages) for call in model.calls)
    assert memory.log.assignments_of_lesson("rule") == []
    assert memory.lessons(["rule"])[0].validity.evidence.pairs == 0


def test_trial_1_never_sees_a_candidate_the_store_still_holds_as_validated(
    tmp_path: Path,
) -> None:
    """A validated lesson demoted to a candidate again (`memory verify`), killed before the
    store's copy was rewritten: the log says candidate, the store still says validated.
    Trial 1 goes by the log."""
    mem = tmp_path / "mem"
    plant(Memory(mem, HashEmbedding()), "rule", RIGHT, status="validated")
    log = Memory(mem, HashEmbedding()).log
    log.change_lessons(log.lessons(["rule"]), "status:candidate", to_status("candidate"))
    memory = Memory(mem, HashEmbedding())
    assert memory.store.get(["rule"])[0].validity.status == "validated"  # the copy lags
    model = failing_model()
    first = episode(mem, model, units_tasks(1)[0])
    assert "rule" not in first.attempts[0].lesson_ids
    assert RIGHT not in prompt_of(model.calls[0].messages)


def test_a_lesson_validated_before_a_kill_cut_short_the_store_s_rewrite_is_shown_again(
    tmp_path: Path,
) -> None:
    """Validated in the log, killed before the store's copy was rewritten (it still says
    candidate), and the run not resumed: the next attempt whose search meets the lesson
    rewrites the copy, and from then on it is shown, from trial 1."""
    mem = tmp_path / "mem"
    plant(Memory(mem, HashEmbedding()), "rule", RIGHT)
    log = Memory(mem, HashEmbedding()).log
    log.change_lessons(log.lessons(["rule"]), "status:validated", to_status("validated"))
    first, second = units_tasks(2)
    met = episode(mem, failing_model(), first)
    assert ["rule" in attempt.lesson_ids for attempt in met.attempts] == [False, False, True]
    after = episode(mem, failing_model(), second)
    assert all("rule" in attempt.lesson_ids for attempt in after.attempts)
    assert Memory(mem, HashEmbedding()).store.get(["rule"])[0].validity.status == "validated"
