"""One turn, several tool calls: concurrent only when every call just reads."""

from __future__ import annotations

import time

from mulligan.actor import Actor, tool
from mulligan.schema import ToolCall
from mulligan.testing import ScriptedModel, reply


def test_a_turn_that_may_change_something_runs_its_calls_in_the_models_order() -> None:
    """A model writes a file and runs the tests in one turn: the tests must see the write.
    Only a turn of read-only calls runs concurrently."""
    done: list[str] = []

    @tool
    def fix(path: str) -> str:
        """Use to fix a file."""
        time.sleep(0.3)  # run concurrently, the check below would finish first
        done.append(f"fix {path}")
        return "fixed"

    @tool
    def check() -> str:
        """Use to run the checks."""
        done.append("check")
        return "passed" if done == ["fix a.py", "check"] else "failed"

    turn = reply(
        "",
        ToolCall(id="a", name="fix", arguments='{"path": "a.py"}'),
        ToolCall(id="b", name="check", arguments="{}"),
    )
    with ScriptedModel([turn, "done"]) as model:
        attempt = Actor(model).run("t", "Fix a.py.", [fix, check])
    assert done == ["fix a.py", "check"]
    assert [r.output for r in attempt.steps[0].results] == ["fixed", "passed"]
