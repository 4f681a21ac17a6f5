"""`mulligan memory mcp`: the memory service (memory_service.py) served over MCP on stdio by
the official SDK's server. The only module that imports the SDK's server side (its client is
mulligan/actor/mcp_tools.py's).

Two tools: `recall(task)` before an attempt, `report(task, answer, passed, feedback, shown)`
after it. A bad argument (one a tool does not take included) comes back as the tool's error
(`is_error`, one line saying what to pass), and nothing is stored. `passed` must be a JSON
boolean: the text "true" is refused, not read as one.
"""

from __future__ import annotations

from collections.abc import Callable
from inspect import signature
from typing import Any

from pydantic import StrictBool

from mulligan.actor.mcp_tools import MISSING_SDK
from mulligan.agent.memory_service import MemoryService
from mulligan.errors import UserError

NAME = "mulligan-memory"
INSTRUCTIONS = """\
A memory of lessons learned from earlier attempts, by this agent and others. Before an
attempt at a task, call recall(task) and show the lessons it returns (and this task's
diagnoses) to the agent. After the attempt, call report(task, answer, passed, feedback, shown)
with what the task's own checks said and the ids of the lessons that were shown: the outcome
is evidence for those lessons, and a failure is reflected on into a new lesson (a candidate
until later tasks show it helps)."""


def build_server(service: MemoryService) -> Any:
    """The SDK's server with the two tools, over `service`."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as exc:
        raise UserError(MISSING_SDK) from exc

    def answered(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return call()
        except UserError as exc:  # the client's mistake: said in the tool's result
            raise ToolError(str(exc)) from exc

    taken: dict[str, list[str]] = {}  # each tool's arguments, by its name

    class Server(MCPServer):
        """The SDK's server, refusing an argument no tool of that name takes: the SDK drops
        it, and a misspelt `shown` would record an attempt that was shown nothing."""

        async def call_tool(self, name: str, arguments: dict[str, Any], *rest: Any) -> Any:
            unknown = sorted(set(arguments) - set(taken.get(name, arguments)))
            if unknown:
                raise ToolError(
                    f"{name}: no argument {unknown[0]!r}; it takes {', '.join(taken[name])} "
                    "(nothing was recorded)"
                )
            return await super().call_tool(name, arguments, *rest)

    server = Server(NAME, instructions=INSTRUCTIONS)

    @server.tool()
    def recall(task: str, family: str = "") -> dict[str, Any]:
        """Before an attempt: the lessons to show for this task (validated ones, and an
        unverified candidate when verification assigns this attempt to try it: show it as
        the validated ones are shown, since attempts not shown it are its comparison), each
        with its id, status, kind, text and evidence, and this task's diagnoses from earlier
        failed attempts in this session. `family`: the group of tasks whose lessons are
        shared (default: the server's)."""
        return answered(lambda: service.recall(task, family))

    @server.tool()
    def report(
        task: str,
        answer: str,
        passed: StrictBool,
        feedback: str = "",
        shown: list[str] | None = None,
        family: str = "",
    ) -> dict[str, Any]:
        """After an attempt: what it answered, whether the task's own checks passed, what
        they said (`feedback`), and the ids of the lessons and diagnoses it was shown.
        Recorded as evidence for those lessons; after a failure the reflector writes a
        diagnosis and a general lesson, stored as a candidate (`reflection` says whether it
        was written, or why not). An unknown id, or one recall never shows, is refused and
        nothing is recorded."""
        return answered(lambda: service.report(task, answer, passed, feedback, shown or [], family))

    taken.update({tool.__name__: list(signature(tool).parameters) for tool in (recall, report)})
    return server
