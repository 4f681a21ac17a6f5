"""Feedback never hands over the answer: a failed check names its expected value only with
`reveal: true`, and its detail stays useful without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mulligan.evaluator import Evaluator
from mulligan.schema import (
    Attempt,
    CheckBase,
    ContainsCheck,
    ExactMatchCheck,
    LLMJudgeCheck,
    NumericCheck,
    RegexCheck,
    Task,
)
from mulligan.tasks.files import load_task_path
from mulligan.tasks.hotpotqa import hotpotqa_tasks
from mulligan.testing import ScriptedModel

SECRET = "Canberra"
CASES: list[tuple[str, type[CheckBase], dict[str, object], str, str]] = [
    # name, check class, its fields, a wrong answer, the expected value that must stay hidden
    ("exact_match", ExactMatchCheck, {"answer": SECRET}, "Sydney", SECRET),
    ("exact_match list", ExactMatchCheck, {"answer": [SECRET, "ACT"]}, "Sydney", SECRET),
    ("contains", ContainsCheck, {"text": SECRET}, "It is Sydney.", SECRET),
    ("regex", RegexCheck, {"pattern": "Canb[e]rra"}, "Sydney", "Canb[e]rra"),
    ("numeric", NumericCheck, {"value": 4217.5}, "about 4000", "4217.5"),
    ("numeric no number", NumericCheck, {"value": 4217.5}, "many", "4217.5"),
]


def detail_of(check: CheckBase, answer: str, judge: ScriptedModel | None = None) -> str:
    task = Task(id="t", prompt="p", checks=[check])  # type: ignore[list-item]
    verdict = Evaluator(judge=judge).evaluate(task, Attempt(task_id="t", answer=answer))
    assert not verdict.passed
    assert verdict.feedback.endswith(verdict.checks[0].detail)
    return verdict.checks[0].detail


@pytest.mark.parametrize(
    ("kind", "fields", "wrong", "secret"),
    [(c[1], c[2], c[3], c[4]) for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_a_failed_check_hides_its_expected_value_unless_revealed(
    kind: type[CheckBase], fields: dict[str, object], wrong: str, secret: str
) -> None:
    hidden = detail_of(kind(**fields), wrong)  # type: ignore[arg-type]
    assert secret not in hidden
    assert hidden.strip(), "the detail still says what went wrong"
    shown = detail_of(kind(**fields, reveal=True), wrong)  # type: ignore[arg-type]
    assert secret in shown


def test_hidden_details_stay_useful() -> None:
    assert "F1 0.00" in detail_of(ExactMatchCheck(answer=SECRET), "Sydney")
    numeric = detail_of(NumericCheck(value=42, abs_tol=0.5), "I think 41")
    assert "41" in numeric and "tolerance" in numeric and "42" not in numeric
    assert "does not contain" in detail_of(ContainsCheck(text=SECRET), "Sydney")


def test_the_judge_reason_is_withheld_unless_revealed() -> None:
    reply = '{"pass": false, "reason": "The capital is Canberra, not Sydney."}'
    hidden = detail_of(LLMJudgeCheck(rubric="Says Canberra"), "Sydney", ScriptedModel([reply]))
    assert SECRET not in hidden and "rubric" in hidden
    shown = detail_of(
        LLMJudgeCheck(rubric="Says Canberra", reveal=True), "Sydney", ScriptedModel([reply])
    )
    assert SECRET in shown


def test_every_check_type_takes_reveal_and_defaults_to_false(tmp_path: Path) -> None:
    checks = [
        "{type: exact_match, answer: a}",
        "{type: contains, text: a}",
        "{type: regex, pattern: a}",
        "{type: numeric, value: 1}",
        "{type: python_tests, tests: 'assert True'}",
        "{type: command, command: 'true'}",
        "{type: file, path: a.txt, contains: a}",
        "{type: llm_judge, rubric: r}",
        "{type: callable, function: 'json:dumps'}",
    ]
    body = "id: t\nprompt: p\nchecks:\n" + "".join(f"  - {c}\n" for c in checks)
    (tmp_path / "t.yaml").write_text(body)
    task = load_task_path(tmp_path / "t.yaml")[0]
    assert [c.reveal for c in task.checks] == [False] * len(checks)
    revealed = body.replace("}", ", reveal: true}")
    (tmp_path / "r.yaml").write_text(revealed)
    assert all(c.reveal for c in load_task_path(tmp_path / "r.yaml")[0].checks)


def test_hotpotqa_never_reveals_its_answer(tmp_path: Path) -> None:
    data = tmp_path / "h.json"
    data.write_text(
        '[{"_id": "q1", "question": "Capital?", "answer": "Canberra",'
        ' "context": [["Australia", ["Its capital is Canberra."]]]}]'
    )
    check = hotpotqa_tasks(data)[0].checks[0]
    assert check.reveal is False


def test_python_tests_name_a_failed_test_without_its_source_unless_revealed() -> None:
    from mulligan.evaluator import Evaluator
    from mulligan.schema import Attempt, PythonTestsCheck, Task

    answer = "```python\ndef add(a, b):\n    return a - b\n```"
    tests = "assert add(1, 1) == 2, 'the sum is 2'\ndef check(f):\n    assert f(2, 3) == 5\n"

    def detail(reveal: bool) -> str:
        check = PythonTestsCheck(tests=tests, entry_point="add", reveal=reveal)
        task = Task(id="t", prompt="p", checks=[check])
        return Evaluator().evaluate(task, Attempt(task_id="t", answer=answer)).checks[0].detail

    hidden, shown = detail(False), detail(True)
    assert "FAILED: test 1 (line 1) -- got 0" in hidden and "test 2" in hidden
    assert "== 2" not in hidden and "the sum is 2" not in hidden and "== 5" not in hidden
    assert "assert add(1, 1) == 2" in shown and "line 3: assert f(2, 3) == 5" in shown


def test_a_failed_file_check_hides_what_it_looked_for_unless_revealed(tmp_path: Path) -> None:
    from mulligan.evaluator import Evaluator
    from mulligan.schema import Attempt, FileCheck, Task

    (tmp_path / "out.txt").write_text("result: 41\n")

    def detail(**check: Any) -> str:
        task = Task(id="t", prompt="p", checks=[FileCheck(path="out.txt", **check)])
        return Evaluator().evaluate(task, Attempt(task_id="t"), tmp_path).checks[0].detail

    assert "42" not in detail(contains="result: 42") + detail(matches=r"result: 42$")
    assert "result: 42" in detail(contains="result: 42", reveal=True)
