"""`--mcp` on the commands: start the servers a run names, once, and give tasks their tools."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import replace

from mulligan.actor.mcp_tools import MCPServers
from mulligan.schema import Task
from mulligan.tasks.suites import Suite


def servers(commands: list[str], tasks: Sequence[Task] = ()) -> MCPServers:
    """Every server the run names (`commands`) or a task names (its `mcp:`), started once
    when entered."""
    return MCPServers(list(commands) + [spec for task in tasks for spec in task.mcp])


def tools_for(task: Task, started: MCPServers, commands: list[str]) -> Task:
    """The task, naming the tools of the run's servers and of its own."""
    specs = list(commands) + task.mcp
    found = [t.name for spec in specs for t in started.tools_of.get(spec.strip(), [])]
    names = [name for name in found if name not in task.tools]
    return task.model_copy(update={"tools": task.tools + list(dict.fromkeys(names))})


@contextlib.contextmanager
def suite_with_mcp(suite: Suite, commands: list[str]) -> Iterator[Suite]:
    """The suite with its tasks given their servers' tools, for as long as the run lasts."""
    if not commands and not any(task.mcp for task in suite.tasks):
        yield suite
        return
    with servers(commands, suite.tasks) as started:
        tasks = [tools_for(task, started, commands) for task in suite.tasks]
        yield replace(suite, tasks=tasks, tools=suite.tools + started.tools)
