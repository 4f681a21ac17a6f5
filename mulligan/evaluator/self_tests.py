"""Reflexion's internal tests: before any attempt is judged, the model writes a few asserts
from the task prompt alone; kept ones become feedback-visible checks of every attempt.

Nothing from the task's checks reaches the writing call: only the prompt and the name of
the function under test. A test is dropped (and counted) when it does not parse, does not
call the function, passes without it (a stub that raises), or times out against that stub.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from mulligan import prompts
from mulligan.evaluator.checks import RUNNERS, CheckContext
from mulligan.evaluator.probe import ask
from mulligan.llm.base import ChatModel
from mulligan.sandbox import Policy
from mulligan.schema import SELF_TEST, Attempt, PythonTestsCheck, Task, Usage

DRY_RUN_SECONDS = 5.0


@dataclass
class SelfTests:
    tests: list[str] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    def as_json(self) -> dict[str, Any]:
        return {"tests": self.tests, "dropped": self.dropped, "usage": self.usage.model_dump()}


def asserts_in(reply: str) -> list[str]:
    """Every line of the reply (inside code fences or not) that starts with `assert`."""
    lines = [line.strip() for line in reply.splitlines()]
    return [line for line in lines if re.match(r"assert\b", line)]


def calls(test: str, name: str) -> bool:
    tree = ast.parse(test)
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
        for node in ast.walk(tree)
    )


def with_self_tests(task: Task, tests: list[str]) -> Task:
    """The task with one feedback-visible check per kept self-test."""
    target = task.code_target()
    if target is None or not tests:
        return task
    checks = [
        PythonTestsCheck(
            tests=test,
            entry_point=target.entry_point,
            prelude=target.prelude,
            name=f"{SELF_TEST} {number}: {test}",
            timeout=DRY_RUN_SECONDS,
        )
        for number, test in enumerate(tests, 1)
    ]
    return task.model_copy(update={"checks": [*task.checks, *checks]})


@dataclass
class SelfTestWriter:
    model: ChatModel
    policy: Policy | None = None
    """What the box hides while the tests are tried against a stub."""

    def write(self, task: Task, count: int) -> SelfTests:
        """Up to `count` kept asserts for the task; none for a task with no entry point."""
        target = task.code_target()
        if target is None or count <= 0:
            return SelfTests()
        text = prompts.render(
            "self_tests", task=task.prompt, entry_point=target.entry_point, count=count
        )
        reply, usage = ask(self.model, text)
        if reply is None:  # no tests, said so: the run goes on without them
            return SelfTests(dropped={"endpoint failed": 1}, usage=usage)
        found = SelfTests(usage=usage)
        for test in dict.fromkeys(asserts_in(reply)):
            reason = self._problem(task, test, target.entry_point)
            if reason:
                found.dropped[reason] = found.dropped.get(reason, 0) + 1
            elif len(found.tests) < count:
                found.tests.append(test)
        return found

    def _problem(self, task: Task, test: str, entry_point: str) -> str | None:
        try:
            if not calls(test, entry_point):
                return "names no entry point"
        except SyntaxError:
            return "does not parse"
        stub = f"```python\ndef {entry_point}(*args, **kwargs):\n    raise NotImplementedError\n```"
        check = with_self_tests(task, [test]).checks[-1]
        stubbed = Attempt(task_id=task.id, answer=stub)
        ctx = CheckContext(task=task, attempt=stubbed, workspace=None, policy=self.policy)
        verdict = RUNNERS["python_tests"](check, ctx)
        if verdict.passed:
            return "passes without the function"
        if "timed out" in verdict.detail:
            return "timed out"
        return None
