"""Reflexion's internal tests (`--self-tests N`): written from the prompt alone, checked and
counted when dropped, shared by every strategy of a study, and measured in the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from mulligan.evaluator import Evaluator
from mulligan.evaluator.self_tests import SelfTestWriter, with_self_tests
from mulligan.memory import HashEmbedding, Memory
from mulligan.report.self_test_report import self_test_note
from mulligan.report.stats import collect
from mulligan.schema import (
    SELF_TEST,
    Attempt,
    CheckResult,
    Episode,
    PythonTestsCheck,
    Task,
    Verdict,
)
from mulligan.settings.run_config import LoopSection, RunConfig
from mulligan.studies.study import Study
from mulligan.testing import ScriptedModel
from tests.helpers.logged_runs import log_run

VISIBLE_MARK = "VISIBLE_MARK_5512"
HIDDEN_MARK = "HIDDEN_MARK_9034"
WRITING = "You write unit tests before any code exists"
REPLY = """Here are the tests:
```python
assert add(2, 2) == 4
assert add(1,
assert 1 == 1
assert True or add(1, 1)
assert add(0, 5) == 5
```"""


def code_task(task_id: str = "add") -> Task:
    return Task(
        id=task_id,
        family="code",
        prompt="Write add(a, b): the sum of a and b.",
        checks=[
            PythonTestsCheck(tests=f"assert add(1, 2) == 3  # {VISIBLE_MARK}", entry_point="add"),
            PythonTestsCheck(
                tests=f"assert add(3, 4) == 7  # {HIDDEN_MARK}",
                entry_point="add",
                visibility="hidden",
            ),
        ],
    )


def writing(messages: list[dict[str, Any]]) -> bool:
    return WRITING in str(messages[0]["content"])


def test_self_tests_are_written_from_the_prompt_alone_and_bad_ones_dropped() -> None:
    model = ScriptedModel([REPLY])
    written = SelfTestWriter(model).write(code_task(), 5)
    (call,) = model.calls
    sent = json.dumps(call.messages)
    assert "Write add(a, b): the sum of a and b." in sent
    assert VISIBLE_MARK not in sent and HIDDEN_MARK not in sent and "add(1, 2)" not in sent
    assert written.tests == ["assert add(2, 2) == 4", "assert add(0, 5) == 5"]
    assert written.dropped == {
        "does not parse": 1,
        "names no entry point": 1,
        "passes without the function": 1,
    }
    assert written.usage.total_tokens > 0


def test_a_task_without_a_function_under_test_gets_no_call() -> None:
    task = Task(id="q", prompt="Say hi.", checks=[])
    assert SelfTestWriter(ScriptedModel()).write(task, 3).tests == []  # a call would fail


def policy(answer: str) -> Any:
    def reply(messages: list[dict[str, Any]], tools: Any) -> str:
        if writing(messages):
            return "```python\nassert add(2, 2) == 5\n```"  # a wrong self-test
        return answer

    return reply


def test_self_tests_are_visible_checks_shared_by_every_strategy(tmp_path: Path) -> None:
    """add is right (visible and hidden checks pass) but the model's own test is wrong: with
    every visible check deciding, the episode does not stop at trial 1; the tests are written
    once per task."""
    model = ScriptedModel(policy=policy("```python\ndef add(a, b):\n    return a + b\n```"))
    memory = Memory(tmp_path / "mem", HashEmbedding())
    loop = LoopSection(trials=2, self_tests=2, own_checks_first=False)
    study = Study(
        tasks=[code_task("a"), code_task("b")],
        strategies=["react", "retry"],
        model_for=lambda strategy: model,
        memory=memory,
        config=RunConfig(loop=loop),
    )
    study.memory.log.start_run("run", study.manifest())
    study.run("run")
    assert sum(writing(call.messages) for call in model.calls) == 2  # once per task
    stats = {s.strategy: s for s in collect(memory.log, "run").strategies}
    assert stats["retry"].attempts == 4  # the false alarm asked for trial 2 on both tasks
    assert stats["react"].attempts == 2
    assert stats["retry"].self_tested.false_alarms == 4
    # the model's own wrong test only decided whether to try again: the task's checks passed,
    # so every submitted answer is scored a pass, under every strategy
    assert stats["react"].solved_by_trial == [2, 2] and stats["retry"].solved_by_trial == [2, 2]
    for strategy in ("react", "retry"):
        logged = memory.log.episode(f"run:{strategy}:a")
        assert logged is not None and logged.passed and logged.verdicts[-1].passed
        assert logged.verdicts[-1].visible_passed is False  # what the agent saw
    assert stats["retry"].by_role["tester"].total_tokens > 0
    episode = memory.log.episode("run:retry:a")
    assert episode is not None
    names = [c.name for c in episode.verdicts[0].checks]
    assert any(name.startswith(SELF_TEST) for name in names)
    assert study.manifest()["config"]["loop"]["self_tests"] == 2


def retried(tmp_path: Path, task: Task, answers: list[str], **loop: Any) -> tuple[Any, Memory]:
    """retry on one task with a wrong self-test; the answers in turn."""
    replies = iter(answers)

    def reply(messages: list[dict[str, Any]], tools: Any) -> str:
        return "```python\nassert add(2, 2) == 5\n```" if writing(messages) else next(replies)

    memory = Memory(tmp_path / "mem", HashEmbedding())
    config = RunConfig(loop=LoopSection(trials=2, self_tests=1, **loop))
    study = Study(
        tasks=[task], strategies=["retry"], model_for=lambda s: ScriptedModel(policy=reply),
        memory=memory, config=config,
    )  # fmt: skip
    memory.log.start_run("run", study.manifest())
    study.run("run")
    (stats,) = collect(memory.log, "run").strategies
    return stats, memory


RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"


def test_the_tasks_own_check_ends_the_episode_over_a_failing_self_test(tmp_path: Path) -> None:
    """By default the task's own visible check decides when the task has one: a right answer
    a wrong self-test fails is submitted at trial 1, not traded for a wrong second."""
    stats, _ = retried(tmp_path, code_task(), [RIGHT, WRONG])
    assert stats.attempts == 1 and stats.solved_by_trial == [1, 1]
    assert stats.self_tested.false_alarms == 1  # the self-test still failed it, and says so


def test_with_every_visible_check_deciding_a_failing_self_test_draws_again(
    tmp_path: Path,
) -> None:
    """The rule before (`own_checks_first` off): the wrong self-test sends retry on, and its
    wrong second answer is submitted; the report reads the run by the rule it ran."""
    stats, memory = retried(tmp_path, code_task(), [RIGHT, WRONG], own_checks_first=False)
    assert stats.attempts == 2 and stats.solved_by_trial == [1, 0]
    assert memory.log.episode("run:retry:add").passed is False  # type: ignore[union-attr]


def test_on_a_task_with_no_check_of_its_own_the_self_tests_decide(tmp_path: Path) -> None:
    task = code_task()
    task = task.model_copy(update={"checks": [c for c in task.checks if c.visibility == "hidden"]})
    stats, _ = retried(tmp_path, task, [RIGHT, WRONG])
    assert stats.attempts == 2 and stats.solved_by_trial == [1, 0]


def test_a_run_logged_before_the_tasks_own_checks_came_first_is_read_by_every_check(
    tmp_path: Path,
) -> None:
    """A manifest without the setting is read as that code stopped: at the first attempt
    whose every visible check passed; a manifest with it, by the task's own checks first."""
    alarm = verdict([False], True)
    alarm.checks.insert(0, CheckResult(type="python_tests", name="example", passed=True, score=1))
    wrong = verdict([False], False)
    wrong.checks.insert(0, CheckResult(type="python_tests", name="example", passed=False, score=0))
    made = {"retry": {"t": [alarm, wrong]}}
    memory = Memory(tmp_path / "mem", HashEmbedding())
    before = {"strategies": ["retry"], "trials": 2, "stop": "honest", "self_tests": 1}
    log_run(memory.log, "old", before, made)
    (old,) = collect(memory.log, "old").strategies
    assert old.submitted["t"] == [True, False]  # it went on past the alarm, as that code did
    now = {"strategies": ["retry"], "config": {"loop": {"trials": 2, "stop": "honest",
                                                         "own_checks_first": True}}}  # fmt: skip
    log_run(memory.log, "new", now, made)  # its rule would have stopped at the first
    (new,) = collect(memory.log, "new").strategies
    assert new.submitted["t"] == [True, True]
    only_where_none = "deciding whether to try again only on a task with no check of its own"
    assert only_where_none in self_test_note(collect(memory.log, "new"))
    assert only_where_none not in self_test_note(collect(memory.log, "old"))


def verdict(own: list[bool], hidden: bool) -> Verdict:
    checks = [
        CheckResult(type="python_tests", name=f"{SELF_TEST} {n}", passed=p, score=float(p))
        for n, p in enumerate(own, 1)
    ]
    checks.append(
        CheckResult(type="python_tests", name="h", visibility="hidden", passed=hidden, score=0.0)
    )
    return Verdict(passed=all(own) and hidden, score=0.0, checks=checks)


def test_false_pass_and_false_alarm_rates_match_a_hand_count(tmp_path: Path) -> None:
    made = {
        "t1": [verdict([True, True], False)],  # false pass
        "t2": [verdict([True, False], True), verdict([True, True], True)],  # alarm, then right
        "t3": [verdict([True], True)],  # right
        "t4": [verdict([False], False), verdict([False], False)],  # both fail: neither
    }
    memory = Memory(tmp_path / "mem", HashEmbedding())
    log_run(
        memory.log, "r", {"strategies": ["retry"], "trials": 2, "stop": "honest"}, {"retry": made}
    )
    (retry,) = collect(memory.log, "r").strategies
    counts = retry.self_tested
    assert counts.attempts == 6
    assert (counts.self_passed, counts.false_passes) == (3, 1)  # t1, t2's second, t3
    assert (counts.hidden_passed, counts.false_alarms) == (3, 1)  # t2 twice, t3


def test_a_verdict_logged_before_is_read_with_the_self_tests_out_of_its_score() -> None:
    """Logs written while the score still counted the self-tests (a run begun by the code
    before) are read with the task's own checks as the score."""
    logged = {
        "passed": False,  # what the code before stored: a wrong self-test made it a fail
        "score": 0.5,
        "checks": [
            {"type": "python_tests", "name": f"{SELF_TEST} 1: assert add(2, 2) == 5",
             "passed": False, "score": 0.0},
            {"type": "python_tests", "name": "h", "visibility": "hidden",
             "passed": True, "score": 1.0},
        ],
    }  # fmt: skip
    verdict = Verdict.model_validate(logged)
    assert verdict.passed and verdict.score == 1.0 and verdict.visible_passed is False


def test_a_task_check_cannot_take_a_self_test_name() -> None:
    check = PythonTestsCheck(tests="assert add(1, 1) == 2", entry_point="add", name="self-test 1")
    with pytest.raises(ValidationError, match="kept for the model's own tests"):
        Task(id="t", prompt="p", checks=[check])


def test_an_episode_logged_before_is_read_with_the_self_tests_out_of_its_score(
    tmp_path: Path,
) -> None:
    right = verdict([False], True)  # a wrong self-test, the hidden tests passed
    memory = Memory(tmp_path / "mem", HashEmbedding())
    memory.log.start_run("r", {"strategies": ["react"], "trials": 1, "stop": "honest"})
    episode = Episode(id="r:react:t", run_id="r", task_id="t", strategy="react")
    memory.log.start_episode(episode)
    episode.attempts.append(Attempt(task_id="t", trial=1))
    episode.verdicts.append(right)
    memory.log.log_attempt(episode, episode.attempts[-1], right)
    memory.log.end_episode(episode)
    stale = right.model_dump(mode="json") | {"passed": False}  # as the code before logged it
    memory.log.db.execute(
        "update attempts set passed = 0, verdict = ?", [json.dumps(stale)]
    )  # fmt: skip
    memory.log.db.conn.commit()
    read = memory.log.episode("r:react:t")
    assert read is not None and read.passed and read.verdicts[0].passed


def test_an_mbpp_task_gets_self_tests(tmp_path: Path) -> None:
    """MBPP's asserts call the function by its own name: the task still names the function
    under test, so --self-tests writes tests for it (it wrote none before)."""
    from mulligan.tasks.mbpp import mbpp_tasks

    problem = {
        "name": "mbpp_1_add",
        "entry_point": "add",
        "prompt": 'def add(a: int, b: int) -> int:\n    """Add two numbers."""\n',
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    "
        "assert candidate(2, 2) == 4\n\ndef test_check():\n    check(add)\n\ntest_check()\n",
    }
    data = tmp_path / "mbpp-py.jsonl"
    data.write_text(json.dumps(problem) + "\n")
    (task,) = mbpp_tasks(data)
    model = ScriptedModel(["```python\nassert add(2, 3) == 5\n```"])
    written = SelfTestWriter(model).write(task, 3)
    assert len(model.calls) == 1 and written.tests == ["assert add(2, 3) == 5"]
    right = Attempt(task_id=task.id, answer="```python\ndef add(a, b):\n    return a + b\n```")
    verdict = Evaluator().evaluate(with_self_tests(task, written.tests), right, None)
    assert verdict.passed and [c.passed for c in verdict.checks] == [True, True, True]
