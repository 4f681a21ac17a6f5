"""The checks: HotpotQA normalisation, exact match, contains, regex, numeric, python_tests
(with details), command and callable checks; a check that cannot run is a failed check."""

from __future__ import annotations

from pathlib import Path

import pytest

from mulligan.evaluator import Evaluator
from mulligan.evaluator.code import keep_definitions, last_code_block
from mulligan.evaluator.normalize import exact_match, f1_score, normalize_answer
from mulligan.schema import (
    Attempt,
    CallableCheck,
    CheckResult,
    CommandCheck,
    ContainsCheck,
    ExactMatchCheck,
    FileCheck,
    LLMJudgeCheck,
    NumericCheck,
    PythonTestsCheck,
    RegexCheck,
    Task,
)
from mulligan.testing import ScriptedModel


def verdict(checks: list, answer: str | None, workspace: Path | None = None, judge=None):  # type: ignore[no-untyped-def]
    task = Task(id="t", prompt="p", checks=checks)
    return Evaluator(judge).evaluate(task, Attempt(task_id="t", answer=answer), workspace)


def test_hotpotqa_normalisation_and_f1() -> None:
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert exact_match("the Beatles", "Beatles")
    assert f1_score("Paris France", "Paris") == pytest.approx(2 / 3)
    assert f1_score("yes", "no") == 0.0


def test_exact_match_pass_fail_and_reveal() -> None:
    ok = verdict([ExactMatchCheck(answer=["1922", "in 1922"])], "In 1922.")
    assert ok.passed and "F1 1.00" in ok.checks[0].detail
    bad = verdict([ExactMatchCheck(answer="Paris", reveal=True)], "London")
    assert not bad.passed and "expected 'Paris'" in bad.checks[0].detail
    secret = verdict([ExactMatchCheck(answer="Paris")], "London")
    assert "Paris" not in secret.feedback


def test_contains_and_regex() -> None:
    assert verdict([ContainsCheck(text="beijing")], "Beijing is hotter").passed
    assert not verdict([ContainsCheck(text="beijing", case_sensitive=True)], "Beijing").passed
    assert verdict([RegexCheck(pattern=r"\d{4}")], "year 2022").passed
    failed = verdict([RegexCheck(pattern=r"^\d+$")], "twelve")
    assert not failed.passed and "does not match" in failed.checks[0].detail


def test_bad_regex_is_refused_when_loading() -> None:
    with pytest.raises(ValueError, match="bad regex"):
        RegexCheck(pattern="(unclosed")


def test_numeric_pulls_numbers_from_text() -> None:
    assert verdict([NumericCheck(value=2.5, abs_tol=0.01)], "hotter by 2.5 °C").passed
    assert verdict([NumericCheck(value=1234567)], "about 1,234,567 people").passed
    assert verdict([NumericCheck(value=100, rel_tol=0.05)], "roughly 103").passed
    last = verdict([NumericCheck(value=28.5, pick="last")], "31 vs 28.5, so 2.5")
    assert not last.passed and "last number is 2.5" in last.checks[0].detail
    assert "28.5" not in last.checks[0].detail
    assert "no number" in verdict([NumericCheck(value=1)], "none").checks[0].detail


CODE = "Here you go:\n```python\ndef add(a, b):\n    return a + b\n\nprint(add(1, 2))\nassert add(1, 1) == 3\n```"


def test_code_extraction_and_cleaning() -> None:
    code = last_code_block(CODE)
    assert code.startswith("def add")
    cleaned = keep_definitions(code)
    assert "print" not in cleaned and "assert" not in cleaned and "def add" in cleaned
    assert keep_definitions("import math\nLIMIT = 3\nx = run()\n") == "import math\nLIMIT = 3"


def test_python_tests_pass_and_fail_with_details() -> None:
    ok = verdict([PythonTestsCheck(tests="assert add(2, 2) == 4\nassert add(0, 0) == 0")], CODE)
    assert ok.passed, ok.checks[0].detail  # the model's own wrong assert was dropped
    assert ok.checks[0].detail == "2/2 tests passed"
    tests = "assert add(2, 2) == 5\nassert add(1, 1) == 2"
    bad = verdict([PythonTestsCheck(tests=tests, reveal=True)], CODE)
    check = bad.checks[0]
    assert not check.passed and check.score == 0.5
    assert "FAILED: assert add(2, 2) == 5 -- got 4" in check.detail


def test_python_tests_with_check_function_and_traceback() -> None:
    tests = (
        "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 2) == 5\n"
    )
    check = PythonTestsCheck(tests=tests, entry_point="add", reveal=True)
    result = verdict([check], CODE).checks[0]
    assert not result.passed
    assert "FAILED" in result.detail and "line 3: assert candidate(2, 2) == 5" in result.detail


def test_python_tests_timeout_and_missing_answer() -> None:
    slow = "```python\ndef add(a, b):\n    while True:\n        pass\n```"
    timed = verdict([PythonTestsCheck(tests="assert add(1, 1) == 2", timeout=1)], slow)
    assert not timed.passed and "timed out" in timed.checks[0].detail
    none = verdict([PythonTestsCheck(tests="assert add(1, 1) == 2")], None)
    assert "no answer" in none.checks[0].detail


def test_python_tests_from_a_workspace_file(tmp_path: Path) -> None:
    (tmp_path / "solution.py").write_text("def double(x):\n    return 2 * x\n")
    check = PythonTestsCheck(tests="assert double(4) == 8", file="solution.py")
    assert verdict([check], "done", tmp_path).passed
    missing = PythonTestsCheck(tests="assert double(4) == 8", file="nope.py")
    assert "does not exist" in verdict([missing], "done", tmp_path).checks[0].detail


def test_a_workspace_file_the_attempt_did_not_write_is_its_failure(tmp_path: Path) -> None:
    """As for a file check: the attempt could have written it, so the verdict tells something
    (the attempt is reflected on), and the check is no environment failure."""
    missing = PythonTestsCheck(tests="assert double(4) == 8", file="nope.py")
    for check in (missing, FileCheck(path="nope.py")):
        judged = verdict([check], "done", tmp_path)
        assert not judged.passed and not judged.environment_failed
        assert not judged.checks[0].environment


def test_command_and_file_checks(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("result: 42\n")
    assert verdict([CommandCheck(command="grep -q 42 out.txt")], "", tmp_path).passed
    failed = verdict([CommandCheck(command="echo nope; exit 3")], "", tmp_path).checks[0]
    assert not failed.passed and "nope" in failed.detail and "exit status 3" in failed.detail
    assert verdict([FileCheck(path="out.txt", contains="42")], "", tmp_path).passed
    assert verdict([FileCheck(path="out.txt", matches=r"^result: \d+$")], "", tmp_path).passed
    assert "does not exist" in verdict([FileCheck(path="x.txt")], "", tmp_path).checks[0].detail
    outside = verdict([FileCheck(path="../etc/passwd")], "", tmp_path).checks[0]
    assert not outside.passed and "outside" in outside.detail
    assert "no workspace" in verdict([CommandCheck(command="true")], "").checks[0].detail


def test_llm_judge() -> None:
    judge = ScriptedModel(
        ['Sure. {"pass": true, "reason": "cites the year"}', "I think it is fine"]
    )
    ok = verdict([LLMJudgeCheck(rubric="mentions a year")], "2022", judge=judge)
    assert ok.passed and ok.checks[0].detail == "cites the year"
    assert "mentions a year" in judge.calls[0].messages[0]["content"]
    unreadable = verdict([LLMJudgeCheck(rubric="x")], "2022", judge=judge)
    assert not unreadable.passed and "not" in unreadable.checks[0].detail
    assert "no judge" in verdict([LLMJudgeCheck(rubric="x")], "a").checks[0].detail


def callable_check(answer: str, attempt: Attempt, workspace: Path | None) -> CheckResult | bool:
    if answer == "raise":
        raise RuntimeError("user check broke")
    return answer.isupper()


def test_callable_check() -> None:
    check = CallableCheck(function="tests.loop.test_evaluator:callable_check")
    assert verdict([check], "YES").passed
    assert not verdict([check], "no").passed
    assert "RuntimeError" in verdict([check], "raise").checks[0].detail
    missing = CallableCheck(function="no_such_module:f")
    assert "cannot import" in verdict([missing], "x").checks[0].detail


def test_hidden_details_never_reach_feedback() -> None:
    checks = [
        ContainsCheck(text="Beijing", name="city"),
        NumericCheck(value=2.5, name="SECRET-difference", visibility="hidden"),
        PythonTestsCheck(tests="assert SECRET_NAME == 1", name="hidden code", visibility="hidden"),
    ]
    result = verdict(checks, "Beijing by 3")
    assert not result.passed
    assert result.feedback == "PASS city: answer contains 'Beijing'"
    assert "SECRET" not in result.feedback and "2.5" not in result.feedback
    assert len(result.checks) == 3  # counted in the score all the same
    assert result.score == pytest.approx(1 / 3)


def test_budget_is_never_a_pass_by_itself() -> None:
    attempt = Attempt(task_id="t", answer=None, stop_reason="max_steps")
    task = Task(id="t", prompt="p", checks=[ContainsCheck(text="x")])
    assert not Evaluator().evaluate(task, attempt).passed
    assert not Evaluator().evaluate(Task(id="t", prompt="p"), attempt).passed
