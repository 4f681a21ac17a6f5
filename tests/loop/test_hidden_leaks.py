"""Hostile review of the honest-stopping promise: nothing a HIDDEN check holds or says may
reach a model request (actor, reflector, self-test writer, curator), the lesson store, the
decision to try again, or the score other than as the submitted attempt's hidden verdict.

The main tool is non-interference: run the same scripted agent on tasks that differ only in
their hidden checks; everything the agent sees (every actor and reflector request) and
everything the lesson store records must then be identical."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mulligan.actor import Actor
from mulligan.evaluator import Evaluator
from mulligan.evaluator.self_tests import SelfTestWriter, with_self_tests
from mulligan.loop import Loop, LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.curator import Curator
from mulligan.reflector import Reflector
from mulligan.runs.build import build_loop
from mulligan.schema import (
    CallableCheck,
    Check,
    CheckResult,
    CommandCheck,
    ExactMatchCheck,
    Lesson,
    LessonScope,
    LessonSource,
    LLMJudgeCheck,
    PythonTestsCheck,
    Task,
)
from mulligan.testing import ScriptedModel

MARK = "HIDDEN_MARKER_7781"
FIRST = "Sure:\n```python\nprint('no')\n```\nno"  # a wrong answer that holds a code block
REFLECT = "You review a failed attempt"
JUDGE = "You grade an answer"


def text_of(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, sort_keys=True)


def agent_policy(messages: list[dict[str, Any]], tools: Any) -> str:
    """Actor: FIRST, then (once it sees a previous attempt) `yes`; reflector: JSON; judge:
    a failing grade."""
    first = str(messages[0].get("content", ""))
    if REFLECT in first:
        return json.dumps({"diagnosis": "Answer with the single word asked for.",
                           "lesson": "Answer with exactly the word the question asks for.",
                           "tags": ["format"], "replaces": []})  # fmt: skip
    if JUDGE in first:
        return json.dumps({"pass": False, "reason": "no"})
    return "yes" if "previous" in text_of(messages).lower() else FIRST


def agent_view(tmp: Path, hidden: list[Check], strategy: str = "reflexion-memory") -> dict:
    """Runs the visible-failing-then-passing task with these hidden checks, judge-less."""
    task = Task(id="t", family="f", prompt="Answer the question: yes or no? Say yes.",
                checks=[*hidden, ExactMatchCheck(answer="yes", name="answer")])  # fmt: skip
    model = ScriptedModel(policy=agent_policy)
    memory = Memory(tmp, HashEmbedding())
    loop = Loop(Actor(model), Evaluator(), LoopSettings(strategy=strategy, trials=3),
                reflector=Reflector(model), memory=memory)  # fmt: skip
    episode = loop.run_episode(task, episode_id="e1")
    seen = [text_of(c.messages) for c in model.calls if JUDGE not in str(c.messages[0])]
    lessons = memory.lessons(episode.lessons_written)
    return {
        "requests": seen,
        "trials": len(episode.attempts),
        "lessons": [(x.kind, x.text, x.scope.tags, x.source.failed_checks) for x in lessons],
        "events": sorted(e["event"] for e in memory.log.lesson_events()),
        "visible_pass": [v.visible_passed for v in episode.verdicts],
    }


BASELINE: list[Check] = [ExactMatchCheck(answer="zzz", name="h", visibility="hidden")]
VARIANTS: dict[str, list[Check]] = {
    # the same hidden check, passing instead of failing: a different hidden verdict only
    "hidden passes": [ExactMatchCheck(answer=FIRST, name="h", visibility="hidden")],
    # hidden checks that cannot run: their "cannot run" makes Verdict.environment_failed
    "hidden tests do not parse": [
        PythonTestsCheck(tests=f"assert (  # {MARK}", name="h", visibility="hidden")
    ],
    "hidden judge, no judge model": [
        LLMJudgeCheck(rubric=f"Must say {MARK}.", name="h", visibility="hidden")
    ],
    "hidden file check, no workspace": [
        PythonTestsCheck(tests="assert True", file="sol.py", name="h", visibility="hidden")
    ],
    # a hidden code check turns the carried answer into its code block only
    "hidden code check": [
        PythonTestsCheck(tests="assert True", entry_point="f", name="h", visibility="hidden")
    ],
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_agent_sees_the_same_whatever_the_hidden_checks(tmp_path: Path, variant: str) -> None:
    """(a)(b)(c): actor and reflector requests, lessons and lesson events must not depend on
    what the hidden checks are or what they said."""
    base = agent_view(tmp_path / "base", BASELINE)
    other = agent_view(tmp_path / "other", VARIANTS[variant])
    assert base["trials"] == 2 and base["lessons"]  # the baseline reflected after trial 1
    for key in ("trials", "visible_pass"):
        assert other[key] == base[key], key
    assert not any(MARK in r for r in other["requests"])
    assert len(other["requests"]) == len(base["requests"]), "a model request more or less"
    for number, (a, b) in enumerate(zip(base["requests"], other["requests"], strict=True)):
        assert a == b, f"request {number} differs"
    for key in ("lessons", "events"):
        assert other[key] == base[key], key


def test_hidden_judge_rubric_reaches_only_the_judge(tmp_path: Path) -> None:
    """One model as actor, judge and reflector (build_loop): the rubric of a hidden
    llm_judge goes to the judge's call, never to an actor or reflector request."""
    task = Task(id="t", family="f", prompt="Say yes.", checks=[
        LLMJudgeCheck(rubric=f"The answer must mention {MARK}.", name="h", visibility="hidden"),
        ExactMatchCheck(answer="yes", name="answer"),
    ])  # fmt: skip
    model = ScriptedModel(policy=agent_policy)
    memory = Memory(tmp_path / "mem", HashEmbedding())
    settings = LoopSettings(strategy="reflexion-memory", trials=3, stop="oracle")
    episode = build_loop(model, settings, memory=memory).run_episode(task)
    judged = [c for c in model.calls if JUDGE in str(c.messages[0])]
    others = [text_of(c.messages) for c in model.calls if c not in judged]
    assert judged and len(episode.attempts) == 3  # oracle: the hidden judge kept failing
    assert not any(MARK in r or "must mention" in r for r in others)
    lessons = memory.lessons(episode.lessons_written)
    assert all(MARK not in x.text and x.source.failed_checks in ([], ["answer"]) for x in lessons)
    assert not episode.passed


@pytest.mark.parametrize("visible", ["ls -A", 'test "$(ls -A)" = README'])
def test_a_hidden_command_check_cannot_change_what_visible_checks_see(
    tmp_path: Path, visible: str
) -> None:
    """Checks run in one writable workspace, in task order: a file a hidden check leaves
    behind must not show in a visible check's result (the feedback the next attempt and the
    reflector get) nor turn a visible pass into a fail (the decision to try again)."""
    task = Task(id="t", family="f", prompt="Say yes.", workspace={"README": "hi\n"}, checks=[
        CommandCheck(command=f"echo 101 > {MARK}.expected", name="h", visibility="hidden"),
        CommandCheck(command=visible, name="files"),  # e.g. "what the attempt left"
        ExactMatchCheck(answer="yes", name="answer"),
    ])  # fmt: skip
    model = ScriptedModel(["yes", "yes"])  # right at once: nothing visible says try again
    episode = build_loop(model, LoopSettings(strategy="repair", trials=2)).run_episode(task)
    assert MARK not in episode.verdicts[0].feedback
    assert episode.verdicts[0].visible_passed is True and len(episode.attempts) == 1


def test_self_tests_never_run_with_a_hidden_checks_prelude(tmp_path: Path) -> None:
    """--self-tests: kept tests become feedback-visible checks. They take the prelude of
    the code check that names the entry point, which may be a hidden one; code the model
    writes then reads the hidden prelude, and what it returns is visible feedback."""
    task = Task(id="t", family="f", prompt="Write f() returning 1.", checks=[
        PythonTestsCheck(tests="assert f() == EXPECTED", entry_point="f", name="hidden tests",
                         prelude=f"EXPECTED = 1\nSECRET = '{MARK}'", visibility="hidden"),
    ])  # fmt: skip
    tested = with_self_tests(task, ["assert f() == 1"])
    nosy = (
        "```python\ndef f():\n    return [v for k, v in globals().items()"
        " if k.isupper()]\n```"
    )  # fmt: skip  (the harness shows "got <value>")
    model = ScriptedModel([nosy, "```python\ndef f():\n    return 1\n```"])
    episode = build_loop(model, LoopSettings(strategy="repair", trials=2)).run_episode(tested)
    assert episode.verdicts[0].visible_passed is False  # the self-test failed
    assert MARK not in episode.verdicts[0].feedback
    assert MARK not in text_of(model.calls[1].messages)


def test_the_self_test_writer_learns_nothing_from_a_hidden_check(tmp_path: Path) -> None:
    """As HumanEval lays its tasks out: the visible examples name no entry point, the hidden
    tests do. The writer's call may see the prompt only (self_tests.py's docstring)."""
    task = Task(id="t", family="f", prompt="Write the function that returns 1.", checks=[
        PythonTestsCheck(tests="assert True", name="examples"),
        PythonTestsCheck(tests="assert secret_fn_7781() == 1", entry_point="secret_fn_7781",
                         prelude=f"# {MARK}", name="hidden tests", visibility="hidden"),
    ])  # fmt: skip
    model = ScriptedModel(["```python\nassert secret_fn_7781() == 1\n```"])
    written = SelfTestWriter(model).write(task, 1)
    assert model.calls == [] and written.tests == []  # the prompt names no function to test


def test_self_tests_take_only_what_the_prompt_shows_from_a_hidden_check() -> None:
    """HumanEval's layout: the hidden tests' entry point and prelude are the prompt's own,
    so the self-tests may use them; a hidden prelude line the prompt does not show is not."""
    prompt = "from typing import List\n\ndef total(xs: List[int]) -> int:\n    ..."
    hidden = PythonTestsCheck(tests="assert total([1]) == 1", entry_point="total",
                              prelude="from typing import List", visibility="hidden")  # fmt: skip
    task = Task(id="t", prompt=prompt, checks=[hidden])
    model = ScriptedModel(["assert total([1, 2]) == 3"])
    checks = with_self_tests(task, SelfTestWriter(model).write(task, 1).tests).checks
    assert "total" in text_of(model.calls[0].messages)
    assert [(c.entry_point, c.prelude, c.visibility) for c in checks[1:]] == [
        ("total", "from typing import List", "feedback")
    ]
    secret = hidden.model_copy(update={"prelude": f"from typing import List\n# {MARK}"})
    task = task.model_copy(update={"checks": [secret]})
    assert [c.prelude for c in with_self_tests(task, ["assert total([1]) == 1"]).checks[1:]] == [""]


def test_the_curator_sends_no_hidden_checks_names(tmp_path: Path) -> None:
    """The curator's rewrite call lists "names that belong to the task": taken from every
    code check's entry point, hidden ones included (curator.py task_names)."""
    task = Task(id="t", family="code", prompt="Write add(a, b).", checks=[
        PythonTestsCheck(tests="assert add(1, 2) == 3", entry_point="add", name="example"),
        PythonTestsCheck(tests="assert _secret_oracle_7781()", entry_point="_secret_oracle_7781",
                         name="hidden tests", visibility="hidden"),
    ])  # fmt: skip
    memory = Memory(tmp_path / "mem", HashEmbedding())
    named = Lesson(id="a", text="In this problem, make add(a, b) handle large a.",
                   scope=LessonScope(family="code", task_id="t"),
                   source=LessonSource(task_id="t"))  # fmt: skip
    memory.store.put([named])
    memory.log.log_lesson(named, stored=True)
    model = ScriptedModel([json.dumps({"lesson": "Handle large inputs in arithmetic."})])
    Curator(memory, model).curate([named], {"t": task}, "cur")
    assert model.calls and "_secret_oracle_7781" not in text_of(model.calls[0].messages)


def nosy_check(answer: str, attempt: Any, workspace: Any) -> CheckResult:
    """A user's callable check: its own result, with its own name."""
    return CheckResult(type="callable", name="self-test of the format", passed=False, score=0.0)


def test_a_hidden_callable_failure_always_counts_in_the_score() -> None:
    """(d): the task's checks cannot be named self-test... (schema), but a callable's own
    CheckResult keeps its name, and the score leaves self-tests out by name."""
    task = Task(id="t", family="f", prompt="Say yes.", checks=[
        ExactMatchCheck(answer="yes", name="answer"),
        CallableCheck(function=f"{__name__}:nosy_check", name="h", visibility="hidden"),
    ])  # fmt: skip
    episode = build_loop(ScriptedModel(["yes"]), LoopSettings(strategy="retry")).run_episode(task)
    assert episode.verdicts[0].checks[1].passed is False
    assert episode.passed is False, "a failed hidden check was left out of the score"


def test_a_task_with_only_hidden_checks_submits_its_first_attempt(tmp_path: Path) -> None:
    """Nothing visible, nothing to say try again: however the hidden checks went, one attempt
    under every repeating strategy, no reflection, no lesson, the hidden verdict the score."""
    for strategy in ("reflexion", "reflexion-memory", "repair", "retry"):
        for answer, passed in (("yes", True), ("no", False)):
            task = Task(id="t", family="f", prompt="Say yes.",
                        checks=[ExactMatchCheck(answer="yes", visibility="hidden")])  # fmt: skip
            model = ScriptedModel([answer])  # a second call of any kind would fail
            memory = Memory(tmp_path / f"{strategy}-{answer}", HashEmbedding())
            loop = build_loop(model, LoopSettings(strategy=strategy, trials=3), memory=memory)
            episode = loop.run_episode(task)
            assert len(episode.attempts) == 1 and episode.passed is passed
            assert episode.lessons_written == [] and memory.log.lesson_events() == []


def test_the_report_says_when_a_hidden_check_could_not_start(tmp_path: Path) -> None:
    """The agent is not told (above); the reader of the report is."""
    from mulligan.memory.log import EpisodeLog
    from mulligan.report.report import markdown
    from mulligan.report.stats import collect
    from mulligan.schema import Verdict
    from tests.helpers.logged_runs import log_run

    def verdict(hidden_ran: bool) -> Verdict:
        detail = "" if hidden_ran else "cannot run: the test interpreter could not start"
        return Verdict.of(
            [
                CheckResult(type="exact_match", name="v", passed=True, score=1.0),
                CheckResult(type="python_tests", name="h", visibility="hidden", passed=False,
                            score=0.0, detail=detail, environment=not hidden_ran),
            ],
            "",
        )  # fmt: skip

    log = EpisodeLog(tmp_path / "episodes.db")
    config = {"strategies": ["retry"], "trials": 1, "task_order": ["a", "b"]}
    log_run(log, "r", config, {"retry": {"a": [verdict(False)], "b": [verdict(True)]}})
    stats = collect(log, "r")
    assert [s.hidden_unrun for s in stats.strategies] == [1]
    assert "In 1 attempt (retry 1) a hidden check could not start" in markdown(stats, 0.0)


def test_every_humaneval_task_lends_the_prompts_own_function_and_prelude() -> None:
    """HumanEval's hidden tests hold the prompt's own entry point and prelude (its imports
    and helpers, as ast.unparse writes them): the prompt shows both, so they stay in use."""
    from mulligan.tasks.humaneval import humaneval_tasks

    for task in humaneval_tasks():
        (hidden,) = [c for c in task.checks if c.visibility == "hidden"]
        target = task.code_target()
        assert isinstance(hidden, PythonTestsCheck) and target is not None, task.id
        assert (target.entry_point, target.prelude) == (hidden.entry_point, hidden.prelude)
