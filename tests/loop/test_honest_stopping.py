"""The honest stopping rule: the hidden checks score the submitted answer, they never decide
whether to try again; `--stop oracle` is the named exception, and reports say which ran."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mulligan import strategies
from mulligan.actor import Actor
from mulligan.errors import ModelError, UserError
from mulligan.evaluator import Evaluator
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.llm.pricing import Price
from mulligan.loop import Loop, LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.reflector import Reflector
from mulligan.report.report import write_report
from mulligan.report.stats import collect
from mulligan.runs.build import build_loop
from mulligan.schema import (
    Attempt,
    CheckResult,
    CommandCheck,
    ContainsCheck,
    ExactMatchCheck,
    PythonTestsCheck,
    RegexCheck,
    Task,
    Usage,
    Verdict,
)
from mulligan.settings.run_config import LoopSection, RunConfig
from mulligan.studies.study import Study
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel
from tests.helpers.logged_runs import log_run

HIDDEN_MARKER = "HIDDEN_MARKER_7781"
CODE = "```python\ndef add(a, b):\n    return a + b if a < 100 else 0\n```"


def code_task() -> Task:
    """Visible: a docstring-like example the answer passes; hidden: a test it fails."""
    return Task(
        id="add",
        family="code",
        prompt="Write add(a, b) that returns the sum of a and b.",
        checks=[
            PythonTestsCheck(tests="assert add(1, 2) == 3", entry_point="add", name="example"),
            PythonTestsCheck(
                tests=f"assert add(100, 1) == 101  # {HIDDEN_MARKER}",
                entry_point="add",
                name="hidden tests",
                visibility="hidden",
            ),
        ],
    )


def is_reflection(body: dict[str, Any]) -> bool:
    return "You review a failed attempt" in body["messages"][0]["content"]


def code_policy(body: dict[str, Any]) -> FakeReply:
    if is_reflection(body):
        return FakeReply(content=json.dumps({"diagnosis": "Handle large a.", "lesson": ""}))
    return FakeReply(content=CODE)


@pytest.mark.parametrize(
    "name", [s.name for s in strategies.REGISTRY.values() if not s.outside_loop]
)  # solve's repair pipeline is not the loop's: tests/solve pins down its stopping
@pytest.mark.parametrize("stop", ["honest", "oracle"])
def test_a_visible_pass_with_a_hidden_failure_is_submitted_and_scored_a_fail(
    tmp_path: Path, name: str, stop: str
) -> None:
    strategy = strategies.get(name)
    with FakeOpenAIServer(policy=code_policy) as server:
        model = OpenAIChatModel("fake", base_url=server.base_url, price=Price(0, 0))
        settings = LoopSettings(strategy=name, trials=3, stop=stop)
        memory = Memory(tmp_path / "mem", HashEmbedding())
        stronger = model if strategy.escalates else None  # the same endpoint takes over
        loop = build_loop(model, settings, memory=memory, escalation=stronger)
        episode = loop.run_episode(code_task())
        requests = json.dumps([r["messages"] for r in server.requests])
    assert not episode.passed  # scored by the hidden tests
    assert episode.verdicts[0].visible_passed is True
    expected = 3 if stop == "oracle" and strategy.repeats else 1
    if strategy.draws_candidates:  # every visible check passed: no second candidate
        expected = 1
    assert len(episode.attempts) == expected
    assert HIDDEN_MARKER not in requests and "hidden tests" not in requests
    assert "100, 1" not in requests  # nor the hidden test's text, nor its result


def selection_policy() -> Callable[[dict[str, Any]], FakeReply]:
    """Candidates that disagree beyond the visible example (a tie), probe inputs, and a
    separating input."""
    drawn = itertools.count()

    def policy(body: dict[str, Any]) -> FakeReply:
        text = body["messages"][-1]["content"]
        if "to compare what they do" in text:
            return FakeReply(content=json.dumps({"inputs": [[1, 2], [150, 1]]}))
        if "Program A (quoted)" in text:
            return FakeReply(content=json.dumps({"input": [200, 1], "output": 201}))
        return FakeReply(content=CODE if next(drawn) % 2 else CODE.replace("0\n", "-1\n"))

    return policy


def test_no_request_of_the_selection_strategy_names_a_hidden_check(tmp_path: Path) -> None:
    """Every request select makes (candidates, probe inputs, the finalists' separation) is
    free of the hidden check's name, text and result. Both candidates pass the visible
    example, so drawing goes on past a pass (`stop_at_pass` off) to reach the separation."""
    with FakeOpenAIServer(policy=selection_policy()) as server:
        model = OpenAIChatModel("fake", base_url=server.base_url, price=Price(0, 0))
        settings = LoopSettings(
            strategy="select", trials=2, separate=True, stop_at_pass=False, probes="always"
        )
        episode = build_loop(model, settings).run_episode(code_task())
        requests = json.dumps([r["messages"] for r in server.requests])  # (not the seeds)
    assert episode.selection is not None and episode.selection.separation  # it was asked
    assert "to compare what they do" in requests and "Program A" in requests
    assert HIDDEN_MARKER not in requests and "hidden tests" not in requests
    assert "100, 1" not in requests and "101" not in requests


def test_every_stored_lesson_names_only_visible_checks(tmp_path: Path) -> None:
    """Under oracle stopping the reflector is called after a hidden failure; the lesson's
    source still never names the hidden check, so `memory export` cannot hand it out."""
    with FakeOpenAIServer(policy=code_policy) as server:
        model = OpenAIChatModel("fake", base_url=server.base_url, price=Price(0, 0))
        memory = Memory(tmp_path / "mem", HashEmbedding())
        settings = LoopSettings(strategy="reflexion", trials=2, stop="oracle")
        episode = build_loop(model, settings, memory=memory).run_episode(code_task())
    lessons = memory.lessons(episode.lessons_written)
    assert lessons and all(lesson.source.failed_checks == [] for lesson in lessons)


def test_a_task_without_visible_checks_gets_one_attempt(tmp_path: Path) -> None:
    task = Task(
        id="q", family="f", prompt="Say yes.",
        checks=[ExactMatchCheck(answer="yes", visibility="hidden")],
    )  # fmt: skip
    model = ScriptedModel(["no"])  # a second call would fail: none is expected
    loop = Loop(Actor(model), Evaluator(), LoopSettings(strategy="retry", trials=3))
    episode = loop.run_episode(task)
    assert len(episode.attempts) == 1 and not episode.passed


def reflexion_loop(model: ScriptedModel, memory: Memory) -> Loop:
    return Loop(
        actor=Actor(model),
        evaluator=Evaluator(),
        settings=LoopSettings(strategy="reflexion-memory", trials=2),
        reflector=Reflector(model),
        memory=memory,
    )


def test_no_reflection_after_the_endpoint_failed(tmp_path: Path) -> None:
    """Trial 1 never reached the model: no diagnosis, no lesson; trial 2 still runs."""
    task = Task(id="t", family="f", prompt="Say yes.", checks=[ExactMatchCheck(answer="yes")])
    model = ScriptedModel([ModelError("endpoint down (scripted)"), "yes"])
    memory = Memory(tmp_path / "mem", HashEmbedding())
    episode = reflexion_loop(model, memory).run_episode(task)
    assert [a.stop_reason for a in episode.attempts] == ["model_error", "answered"]
    assert episode.passed and episode.lessons_written == []


def test_no_lesson_from_a_check_that_cannot_start(tmp_path: Path) -> None:
    task = Task(
        id="t", family="f", prompt="Say yes.", workspace={},
        checks=[CommandCheck(command="no-such-command-31337", name="tests")],
    )  # fmt: skip
    model = ScriptedModel(["yes", "yes"])  # a reflection call would find no reply and fail
    memory = Memory(tmp_path / "mem", HashEmbedding())
    episode = reflexion_loop(model, memory).run_episode(task)
    assert len(episode.attempts) == 2 and episode.lessons_written == []
    assert episode.verdicts[0].environment_failed
    assert memory.log.lesson_events() == []


def test_no_lesson_when_the_test_interpreter_cannot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A python_tests check whose interpreter the box cannot start (exit 127) is the
    environment's failure, named as such, not the model's: no diagnosis, no lesson."""
    import mulligan.sandbox.box as box

    monkeypatch.setattr(box, "python_for_child", lambda policy=None: str(tmp_path / "no-python"))
    check = PythonTestsCheck(tests="assert f() == 1", entry_point="f")
    task = Task(id="t", family="f", prompt="Write f.", checks=[check])
    model = ScriptedModel(["```python\ndef f():\n    return 1\n```"] * 2)
    memory = Memory(tmp_path / "mem", HashEmbedding())
    episode = reflexion_loop(model, memory).run_episode(task)
    first = episode.verdicts[0]
    assert first.environment_failed and not first.passed
    assert first.checks[0].detail.startswith("cannot run: the test interpreter could not start")
    assert "no-python" in first.checks[0].detail
    assert episode.lessons_written == [] and memory.log.lesson_events() == []


# ---------------------------------------------------------------- the report's hand count


def verdict(visible: bool, hidden: bool) -> Verdict:
    checks = [
        CheckResult(type="t", name="v", passed=visible, score=float(visible)),
        CheckResult(type="t", name="h", visibility="hidden", passed=hidden, score=float(hidden)),
    ]
    return Verdict(passed=visible and hidden, score=0.0, checks=checks)


def attempt(trial: int, reflected: bool) -> Attempt:
    made = Attempt(task_id="", trial=trial)
    made.charge("actor", Usage(prompt_tokens=90, completion_tokens=10))
    if reflected:
        made.charge("reflector", Usage(prompt_tokens=8, completion_tokens=2))
    return made


LOG = {  # task: [(visible, hidden), ...] as an oracle run made them
    "t1": [(True, False), (True, True)],
    "t2": [(False, False), (True, True)],
    "t3": [(True, True)],
    "t4": [(False, False), (False, False), (False, False)],
}


def logged_run(tmp_path: Path, stop: str) -> tuple[Memory, str]:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    run_id = f"run-{stop}"
    made = {task: [verdict(*pair) for pair in pairs] for task, pairs in LOG.items()}
    config = {"strategies": ["retry"], "trials": 3, "stop": stop, "task_order": list(LOG)}
    log_run(
        memory.log, run_id, config, {"retry": made}, lambda trial, last: attempt(trial, not last)
    )
    return memory, run_id


def test_honest_and_oracle_scores_match_a_hand_count(tmp_path: Path) -> None:
    memory, run_id = logged_run(tmp_path, "oracle")
    (retry,) = collect(memory.log, run_id).strategies
    # submitted (first visible pass, else the budget's last): t1 F F F, t2 F T T, t3 T T T
    assert retry.solved_by_trial == [1, 2, 2]
    assert retry.any_by_trial == [1, 3, 3]  # t1 and t2 passed at trial 2
    # tokens: 100 an attempt, 10 a reflection, not counted after the submitted attempt
    # budget 1: 4 x 100; budget 2: t1 100, t2 210, t3 100, t4 210; budget 3: t4 320
    assert retry.tokens_by_trial == [400, 620, 730]
    assert retry.solved_at == {"t1": None, "t2": 2, "t3": 1, "t4": None}


@pytest.mark.parametrize("stop", ["honest", "oracle"])
def test_the_report_says_first_which_rule_ran(tmp_path: Path, stop: str) -> None:
    memory, run_id = logged_run(tmp_path, stop)
    write_report(memory.log, run_id, tmp_path / "out")
    text = (tmp_path / "out" / "report.md").read_text()
    first = text.split("## ")[0]
    assert f"{stop.capitalize()} stopping" in first
    other = "oracle" if stop == "honest" else "honest"
    assert f"{other.capitalize()} stopping" not in first
    assert "submitted answer passed, 3 trials" in text
    assert (tmp_path / "out" / "success_by_tokens.svg").read_text().count("<polyline") == 1


def test_repair_carries_the_answer_and_feedback_and_never_reflects() -> None:
    task = Task(id="t", family="f", prompt="Say yes.", checks=[ExactMatchCheck(answer="yes")])
    model = ScriptedModel(["no", "yes"])  # a reflection call would find no reply and fail
    episode = build_loop(model, LoopSettings(strategy="repair", trials=3)).run_episode(task)
    assert [a.answer for a in episode.attempts] == ["no", "yes"] and episode.passed
    second = json.dumps(model.calls[1].messages)
    assert "Your previous final answer" in second and "FAIL" in second  # answer and feedback
    assert episode.lessons_written == []


def test_a_study_continues_from_another_runs_trial_1s(tmp_path: Path) -> None:
    """--first-from: the oracle study reuses the honest study's trial 1s (paired, paid once);
    only its later trials call the model."""
    task = Task(
        id="t", family="f", prompt="Say yes.",
        checks=[
            ContainsCheck(text="yes", name="word"),
            RegexCheck(pattern="^yes$", name="hidden", visibility="hidden"),
        ],
    )  # fmt: skip
    memory = Memory(tmp_path / "mem", HashEmbedding())

    def study(stop: str, replies: list[str], first_from: str | None = None) -> ScriptedModel:
        model = ScriptedModel(replies)
        run = Study(
            tasks=[task], strategies=["react", "retry"], model_for=lambda s: model,
            memory=memory, config=RunConfig(loop=LoopSection(trials=2, stop=stop)), first_from=first_from,
        )  # fmt: skip
        run.memory.log.start_run(f"{stop}-{first_from}", run.manifest())
        run.run(f"{stop}-{first_from}")
        return model

    honest = study("honest", ["yes."])  # passes visibly, fails hidden: retry submits it
    oracle = study("oracle", ["yes"], first_from="honest-None")  # only retry's trial 2
    assert len(honest.calls) == 1 and len(oracle.calls) == 1
    stats = {s.strategy: s for s in collect(memory.log, "oracle-honest-None").strategies}
    assert stats["react"].solved_by_trial == [0, 0] and stats["retry"].any_by_trial == [0, 1]
    with pytest.raises(UserError, match="first-from nosuch"):
        study("oracle", [], first_from="nosuch")
