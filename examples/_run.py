"""Shared by the example scripts: run one seed task against the configured endpoint."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from mulligan.actor import Actor, build_tools
from mulligan.cli import display
from mulligan.errors import UserError
from mulligan.llm.connect import connect
from mulligan.settings.loading import load_config
from mulligan.tasks.examples import EXAMPLE_TOOLS, TASKS


def run_example(task_id: str) -> int:
    task = next(t for t in TASKS if t.id == task_id)
    try:
        model = connect(load_config({}).endpoint)
    except UserError as exc:
        print(f"{Path(sys.argv[0]).name}: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        for relative, content in (task.workspace or {}).items():
            (Path(scratch) / relative).parent.mkdir(parents=True, exist_ok=True)
            (Path(scratch) / relative).write_text(content)
        tools = build_tools(
            task.tools, workspace=scratch, documents=task.documents, extra=EXAMPLE_TOOLS
        )
        attempt = Actor(model).run(task.id, task.prompt, tools)
    print(display.trajectory(attempt))
    return 0
