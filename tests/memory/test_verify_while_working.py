"""Verification while working: from trial 2 on, a strategy that keeps the store shows a
relevant candidate to some of the attempts it makes anyway, assigned at random in blocks of
two per trial position; the attempts with and without it differ only in the candidate; the
pairs they make are the candidate's evidence, settled under the [validity] rule. Trial 1
never sees a candidate; a validated lesson reaches every attempt; a refuted one none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mulligan import prompts
from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.runs.build import build_loop
from mulligan.schema import Episode, Task
from mulligan.testing import ScriptedModel
from tests.memory.helpers import (
    RIGHT,
    WRONG,
    fresh,
    plant,
    prompt_of,
    units_tasks,
    working_model,
)


def run(
    memory: Memory, model: ScriptedModel, tasks: list[Task], strategy: str = "reflexion-memory",
    **settings: Any,
) -> list[Episode]:  # fmt: skip
    chosen = LoopSettings(strategy=strategy, trials=3, min_similarity=0.0, **settings)
    loop = build_loop(model, chosen, memory=memory)
    return [loop.run_episode(task) for task in tasks]


def shown(episode: Episode, lesson_id: str = "rule") -> list[bool]:
    return [lesson_id in attempt.lesson_ids for attempt in episode.attempts]


def test_trial_one_never_sees_a_candidate_and_later_trials_are_assigned_in_blocks(
    tmp_path: Path,
) -> None:
    memory = fresh(tmp_path)
    plant(memory, "rule", RIGHT)
    episodes = run(memory, working_model(), units_tasks(6))  # never right: 3 trials each
    assert all(not shown(e)[0] for e in episodes)
    for trial in (2, 3):
        arms = [memory.assignment(e.id, trial) for e in episodes]
        assert all(a is not None and a.lesson_id == "rule" for a in arms)
        made = [a.shown for a in arms if a]
        assert [shown(e)[trial - 1] for e in episodes] == made
        assert all(made[n] != made[n + 1] for n in (0, 2, 4))  # each block: one of each
        assert all(a.outcome == "failed" and a.pair for a in arms if a)
    v = memory.lessons(["rule"])[0].validity
    assert v.status == "candidate"  # it changed nothing: every pair the same
    assert (v.evidence.pairs, v.evidence.helped, v.evidence.hurt) == (6, 0, 0)
    assert v.retrieved == 6  # shown to half of the twelve later attempts
    events = [e["event"] for e in memory.log.lesson_events("rule")]
    assert events.count("assigned") == 12 and events.count("judged") == 12
    assert events.count("shown") == 6


def test_with_and_without_the_candidate_the_attempts_differ_only_in_it(tmp_path: Path) -> None:
    memory = fresh(tmp_path)
    plant(memory, "rule", RIGHT)
    model = working_model()
    task = units_tasks(1)[0]
    first, second = run(memory, model, [task, task])  # the same task twice: one block
    arms = [memory.assignment(e.id, 2) for e in (first, second)]
    assert {a.shown for a in arms if a} == {True, False}
    actor = [c.messages for c in model.calls if "You review" not in c.messages[0]["content"]]
    assert len(actor) == 6  # three attempts each, one call per attempt
    with_, without = (actor[1], actor[4]) if arms[0] and arms[0].shown else (actor[4], actor[1])
    block = prompts.render("lessons", lessons=[RIGHT])
    assert any(block in m["content"] for m in with_) and "(unverified)" not in prompt_of(with_)
    stripped = [
        {**m, "content": m["content"].replace(block, "").strip()}
        for m in with_
        if m["content"].replace(block, "").strip()
    ]
    trimmed = [{**m, "content": m["content"].strip()} for m in without]
    assert stripped == trimmed


def test_a_lesson_that_helps_is_validated_within_8_tasks_and_then_reaches_trial_1(
    tmp_path: Path,
) -> None:
    memory = fresh(tmp_path)
    plant(memory, "rule", RIGHT)
    model = working_model(right_when=RIGHT)
    tasks = units_tasks(10)
    needed = 0
    for task in tasks:
        run(memory, model, [task])
        needed += 1
        if memory.lessons(["rule"])[0].validity.status == "validated":
            break
    assert needed <= 8
    v = memory.lessons(["rule"])[0].validity
    assert v.evidence.helped == v.evidence.pairs >= 2 and v.evidence.hurt == 0
    later = Memory(tmp_path / "mem", HashEmbedding())  # a new session on the same memory
    (episode,) = run(later, model, tasks[-1:])
    assert shown(episode) == [True] and episode.passed
    assert later.assignment(episode.id, 1) is None


def test_a_lesson_that_makes_every_attempt_fail_is_refuted_and_never_shown_again(
    tmp_path: Path,
) -> None:
    memory = fresh(tmp_path)
    plant(memory, "bad", WRONG)
    model = working_model(wrong_when=WRONG, retry_right=True)  # a second try passes without it
    episodes = run(memory, model, units_tasks(8))
    v = memory.lessons(["bad"])[0].validity
    assert v.status == "refuted" and v.evidence.hurt >= 1 and v.evidence.helped == 0
    refuted_at = next(
        n for n, e in enumerate(episodes) if any(memory.assignment(e.id, t) for t in (2, 3))
        and memory.lessons(["bad"])[0].validity.status == "refuted"
    )  # fmt: skip
    assert refuted_at <= 3
    for episode in episodes:  # shown only by assignment, and never once refuted
        for attempt in episode.attempts:
            if "bad" in attempt.lesson_ids:
                assignment = memory.assignment(episode.id, attempt.trial)
                assert assignment is not None and assignment.shown
    status_at = [e["event"] for e in memory.log.lesson_events("bad")]
    after = status_at[status_at.index("status:refuted") + 1 :]
    assert "assigned" not in after and "retrieved" not in after
    again = run(Memory(tmp_path / "mem", HashEmbedding()), model, units_tasks(3))
    assert all(not any(shown(e, "bad")) for e in again)


@pytest.mark.parametrize("strategy", ["react", "retry", "reflexion", "select"])
def test_strategies_without_the_store_read_none_of_it(tmp_path: Path, strategy: str) -> None:
    memory = fresh(tmp_path)
    plant(memory, "rule", RIGHT)
    plant(memory, "proven", WRONG, status="validated")
    model = working_model(right_when=RIGHT)
    episodes = run(memory, model, units_tasks(4), strategy)
    given = {i for e in episodes for a in e.attempts for i in a.lesson_ids}
    assert not given & {"rule", "proven"}
    assert all(memory.assignment(e.id, t) is None for e in episodes for t in (1, 2, 3))


def test_show_candidates_shows_every_candidate_from_trial_1_and_assigns_nothing(
    tmp_path: Path,
) -> None:
    memory = fresh(tmp_path)
    plant(memory, "rule", RIGHT)
    model = working_model(right_when=RIGHT)
    (episode,) = run(memory, model, units_tasks(1), show_candidates=True)
    assert shown(episode) == [True] and episode.passed
    assert "(unverified) " + RIGHT in json.dumps(model.calls[0].messages)
    assert memory.assignment(episode.id, 1) is None


def test_a_frozen_memory_verifies_nothing(tmp_path: Path) -> None:
    memory = fresh(tmp_path)
    plant(memory, "rule", RIGHT)
    memory.freeze()
    episodes = run(memory, working_model(right_when=RIGHT), units_tasks(4))
    assert all(not any(shown(e)) for e in episodes)
    assert memory.lessons(["rule"])[0].validity.evidence.pairs == 0


def test_retry_given_the_memory_verifies_with_nothing_else_carried(tmp_path: Path) -> None:
    """retry[memory]: each attempt an independent draw but for the store, so an attempt the
    candidate is withheld from sees what trial 1 saw, and one it is shown to only adds it."""
    memory = fresh(tmp_path)
    plant(memory, "rule", RIGHT)
    model = working_model(right_when=RIGHT)
    episodes = run(memory, model, units_tasks(6), "retry[memory]")
    assert not shown(episodes[0])[0]  # a candidate: never at trial 1
    assert shown(episodes[-1]) == [True]  # validated since: from trial 1
    assert memory.lessons(["rule"])[0].validity.status == "validated"
    actor = [
        c.messages for c in model.calls if "careful problem solver" in c.messages[0]["content"]
    ]
    block = prompts.render("lessons", lessons=[RIGHT])
    seen_arms, start = set(), 0
    for episode in episodes[:2]:  # block partners at trial 2: one of each arm
        calls, start = actor[start : start + len(episode.attempts)], start + len(episode.attempts)
        for messages, was_shown in zip(calls[1:], shown(episode)[1:], strict=True):
            cleaned = [{**m, "content": m["content"].replace(block, "").strip()} for m in messages]
            cleaned = [m for m in cleaned if m["content"]]
            assert cleaned == [{**m, "content": m["content"].strip()} for m in calls[0]]
            assert any(block in m["content"] for m in messages) == was_shown
            seen_arms.add(was_shown)
    assert seen_arms == {True, False}


def test_select_given_the_memory_tries_the_candidate_on_later_draws(tmp_path: Path) -> None:
    """select[memory]: every draw is independent; from draw 2 on, the candidate is assigned as
    on any later attempt, and the draws it is shown to are the ones that pass."""
    memory = fresh(tmp_path)
    plant(memory, "rule", RIGHT)
    episodes = run(memory, working_model(right_when=RIGHT), units_tasks(6), "select[memory]")
    assert not shown(episodes[0])[0]  # a candidate: never the first draw
    for episode in episodes:
        for attempt, verdict in zip(episode.attempts, episode.verdicts, strict=True):
            assert verdict.passed == ("rule" in attempt.lesson_ids)
            assigned = memory.assignment(episode.id, attempt.trial)
            if assigned:  # a later draw, assigned while the lesson was a candidate
                assert attempt.trial > 1 and assigned.shown == verdict.passed
    v = memory.lessons(["rule"])[0].validity
    assert v.evidence.helped == v.evidence.pairs >= 2 and v.status == "validated"
    assert shown(episodes[-1]) == [True]  # validated: from the first draw on
