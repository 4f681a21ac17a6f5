"""What the commands share: the approver, the selected suite, the memory to open and the log
a resume needs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mulligan import validate
from mulligan.actor.tools import Approver
from mulligan.defaults import DEFAULT_MEMORY
from mulligan.errors import UserError
from mulligan.llm.base import ChatModel
from mulligan.memory import Memory, make_embedder
from mulligan.run_config import RunConfig
from mulligan.schema import Role, ToolCall, Usage
from mulligan.tasks.suites import Suite, load_suite, select


def cli_approver(approve_all: bool) -> Approver:
    def approve(call: ToolCall) -> bool:
        if approve_all:
            return True
        if not sys.stdin.isatty():
            return False
        answer = input(f"allow {call.name}({call.arguments})? [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    return approve


def selected(args: argparse.Namespace) -> Suite:
    suite = load_suite(args.suite, data=args.data, feedback=args.feedback)
    ids = [i.strip() for i in args.ids.split(",")] if args.ids else None
    suite.tasks = select(suite.tasks, ids=ids, limit=args.limit, sample=args.sample, seed=args.seed)
    if getattr(args, "network", False):
        suite.tasks = [task.model_copy(update={"network": True}) for task in suite.tasks]
    return suite


def open_memory(
    config: RunConfig,
    endpoint: ChatModel | None = None,
    default: str = DEFAULT_MEMORY,
    *,
    reading: bool = False,
    existing: bool = False,
) -> Memory:
    """The memory the configuration names: a directory, or a chroma URL with the log in
    `default`, under its validity rules. `reading`: the store opens without an embedding
    (see `LessonStore.use` to add one). `existing`: a directory must hold a memory already
    (a command that only reads creates nothing)."""
    location = config.run.memory or default
    spec = config.run.embedding
    rules = config.validity

    def embedder() -> Any:
        return None if reading else make_embedder(spec, endpoint)  # type: ignore[arg-type]

    validate.memory_directory(location)
    if existing:
        validate.memory_to_read(location)
    remote = location.startswith(("http://", "https://"))
    if remote:
        validate.memory_directory(default)
    directory = default if remote else location
    try:
        return Memory(directory, embedder, store=location if remote else None, rules=rules)
    except OSError as exc:  # e.g. under /proc: the checks above pass, mkdir does not
        raise UserError(
            f"--memory {directory}: cannot be created ({exc.strerror}: {exc.filename}); "
            "pass a directory on an ordinary filesystem"
        ) from exc


def log_to_resume(config: RunConfig, run_id: str, default: str = DEFAULT_MEMORY) -> None:
    """`--resume` needs the log that holds the run: refused before anything is created."""
    location = config.run.memory or default
    directory = default if location.startswith(("http://", "https://")) else location
    log = Path(directory).expanduser() / "episodes.db"
    if not log.exists():
        raise UserError(
            f"--resume {run_id}: no episode log at {log}; "
            "pass the --memory (bench: --out) the run used"
        )


def usage_json(usage: Usage, by_role: dict[Role, Usage]) -> dict[str, Any]:
    """Tokens and cost (null when the price is unknown), and the same split by role."""
    return usage.as_json() | {"by_role": {role: u.as_json() for role, u in by_role.items()}}
