"""MBPP in MultiPL-E's `mbpp-py.jsonl` format: the first assert as feedback, all of them hidden."""

from __future__ import annotations

import ast
from pathlib import Path

from mulligan.errors import UserError
from mulligan.schema import Check, PythonTestsCheck, Task
from mulligan.tasks.humaneval import code_task, prelude_of
from mulligan.tasks.rows import read_jsonl, refuse_repeats, text_fields


def asserts_of(test: str, entry_point: str) -> list[str]:
    """The asserts inside `def check(candidate)`, calling the function by its own name."""
    return [
        ast.unparse(statement).replace("candidate(", f"{entry_point}(")
        for node in ast.walk(ast.parse(test))
        if isinstance(node, ast.FunctionDef) and node.name == "check"
        for statement in node.body
        if isinstance(statement, ast.Assert)
    ]


def mbpp_tasks(path: Path) -> list[Task]:
    if not path.exists():
        raise UserError(f"{path}: no such file; mbpp needs MultiPL-E's mbpp-py.jsonl (--data PATH)")
    tasks, rows = [], read_jsonl(path)
    for line_number, problem in rows:
        where = f"{path}:{line_number}"
        text_fields(problem, where, ("entry_point", "prompt", "test"), ("name",), "MultiPL-E")
        entry, prompt, test = problem["entry_point"], problem["prompt"], problem["test"]
        prelude = prelude_of(prompt, entry)
        try:
            visible = asserts_of(test, entry)[:1]
        except SyntaxError as exc:
            raise UserError(f"{where}: field 'test' does not parse ({exc})") from exc
        checks: list[Check] = []
        if visible:  # it names the function under test (a missing one is said so, and
            # --self-tests finds what to test); the hidden tests call their own check()
            first = PythonTestsCheck(
                name="first test", tests=visible[0], prelude=prelude, entry_point=entry
            )
            checks.append(first)
        checks.append(
            PythonTestsCheck(name="hidden tests", tests=test, prelude=prelude, visibility="hidden")
        )
        task_id = problem.get("name", f"mbpp/{line_number}")
        tasks.append(code_task(task_id, "mbpp", prompt, entry, checks, None))
    refuse_repeats(path, "name", ((n, task.id) for (n, _), task in zip(rows, tasks, strict=True)))
    return tasks
