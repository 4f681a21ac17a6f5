"""`mulligan memory mcp`: the memory as a service to other agents, over MCP on stdio
(mulligan/agent/mcp_server.py). Standard output is the protocol's: this command writes
nothing else there."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from mulligan import strategies
from mulligan.agent.mcp_server import build_server
from mulligan.agent.memory_service import MemoryService
from mulligan.cli.output import REPORTER
from mulligan.cli.pipeline import running
from mulligan.memory import Memory
from mulligan.reflector import Reflector
from mulligan.runs.build import connect_reflector, loop_settings
from mulligan.runs.lifecycle import manifest, new_run_id
from mulligan.settings.loading import load_config


def cmd_memory_mcp(args: argparse.Namespace, open_memory: Callable[[], Memory]) -> int:
    """`open_memory`: the memory the flags name, opened once the reflector is connected."""
    config = load_config(vars(args))
    reflector = Reflector(connect_reflector(config, REPORTER))
    memory = open_memory()
    run_id = f"mcp-{new_run_id(None)}"
    shown_as = loop_settings(config, strategies.LEARNER)  # what a memory arm is shown
    service = MemoryService(memory, reflector, shown_as, run_id, family=args.family or "")
    # never resumed: the process that starts the run is the one that ends it, or whose end,
    # by kill -9 too, makes the log read it as interrupted (memory/log.py, as_now)
    wanted = manifest(config, command="memory mcp", family=service.family)
    with running(memory.log, run_id, wanted, resume=False, resumable=False):
        print(
            f"mulligan: serving the memory {memory.where} over MCP on stdio (tools recall, "
            f"report; reflector {reflector.model.name}) · run id {run_id}",
            file=sys.stderr,
        )
        build_server(service).run("stdio")  # until the client closes the connection
    return 0
