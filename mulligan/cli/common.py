"""What the commands share: the settings the flags make (actor, loop, validity), the
approver, the selected suite, the memory to open and the log a resume needs."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from mulligan import validate
from mulligan.actor import ActorSettings, Budget, CompressionSettings
from mulligan.actor.tools import Approver
from mulligan.config import Settings
from mulligan.defaults import DEFAULT_MEMORY
from mulligan.errors import UserError
from mulligan.llm.base import ChatModel
from mulligan.loop import LoopSettings
from mulligan.memory import Memory, ValidityRules, make_embedder
from mulligan.schema import Role, ToolCall, Usage
from mulligan.tasks.suites import Suite, load_suite, select


def budget_from(args: argparse.Namespace) -> dict[str, Any]:
    return {
        name: getattr(args, name)
        for name in Budget.field_names()
        if getattr(args, name, None) is not None
    }


def actor_settings(args: argparse.Namespace, settings: Settings, base: Budget) -> ActorSettings:
    given = {
        "threshold_tokens": args.compress_at,
        "keep_recent": args.keep_recent,
        "summary_max_tokens": args.summary_cap,
        "context_window": args.context_window,
    }
    compression = CompressionSettings(
        enabled=not args.no_compression, **{k: v for k, v in given.items() if v is not None}
    )
    return ActorSettings(
        protocol=settings.protocol,
        budget=replace(base, **budget_from(args)),
        forced=tuple(budget_from(args)),
        compression=compression,
    )


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
    settings: Settings,
    endpoint: ChatModel | None = None,
    rules: ValidityRules | None = None,
    default: str = DEFAULT_MEMORY,
    *,
    reading: bool = False,
) -> Memory:
    """The memory the settings name: a directory, or a chroma URL with the log in `default`.
    `reading`: the store opens without an embedding (see `LessonStore.use` to add one)."""
    location = settings.memory or default
    spec = settings.embedding

    def embedder() -> Any:
        return None if reading else make_embedder(spec, endpoint)  # type: ignore[arg-type]

    validate.memory_directory(location)
    if location.startswith(("http://", "https://")):
        validate.memory_directory(default)
        return Memory(default, embedder, store=location, rules=rules)
    return Memory(location, embedder, rules=rules)


def log_to_resume(settings: Settings, run_id: str, default: str = DEFAULT_MEMORY) -> None:
    """`--resume` needs the log that holds the run: refused before anything is created."""
    location = settings.memory or default
    directory = default if location.startswith(("http://", "https://")) else location
    log = Path(directory).expanduser() / "episodes.db"
    if not log.exists():
        raise UserError(
            f"--resume {run_id}: no episode log at {log}; "
            "pass the --memory (bench: --out) the run used"
        )


def loop_settings(args: argparse.Namespace, strategy: str, **more: Any) -> LoopSettings:
    """The loop the flags ask for (`more`: what the command adds, such as extra tools)."""
    return LoopSettings(
        strategy=strategy,
        trials=args.trials,
        stop=args.stop,
        carried_reflections=args.carried_reflections,
        carry=args.carry,
        min_similarity=args.min_similarity,
        **more,
    )


def validity_rules(args: argparse.Namespace) -> ValidityRules:
    return ValidityRules(
        validate_after=args.validate_after,
        refute_after=args.refute_after,
        ttl_days=args.lesson_ttl_days,
    )


def usage_json(usage: Usage, by_role: dict[Role, Usage]) -> dict[str, Any]:
    """Tokens and cost (null when the price is unknown), and the same split by role."""
    return usage.as_json() | {"by_role": {role: u.as_json() for role, u in by_role.items()}}
