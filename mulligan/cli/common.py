"""What the commands share: the approver, the selected suite and its selection as a manifest
records it."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Literal

from mulligan.actor.tools import Approver
from mulligan.errors import UserError
from mulligan.schema import ToolCall
from mulligan.tasks.suites import Suite, load_suite, select


def cli_approver(approve_all: bool) -> Approver:
    def approve(call: ToolCall) -> bool:
        if approve_all or not sys.stdin.isatty():  # asked only on a terminal
            return approve_all
        answer = input(f"allow {call.name}({call.arguments})? [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    return approve


def selected(args: argparse.Namespace) -> Suite:
    suite = load_suite(args.suite, data=args.data, feedback=feedback_of(args))
    ids = [i.strip() for i in args.ids.split(",")] if args.ids else None
    suite.tasks = select(suite.tasks, ids=ids, limit=args.limit, sample=args.sample, seed=args.seed)
    if getattr(args, "network", False):
        suite.tasks = [task.model_copy(update={"network": True}) for task in suite.tasks]
    return suite


def feedback_of(args: argparse.Namespace) -> Literal["em", "hidden"]:
    """How hotpotqa shows its answer check (`--feedback`); refused for another suite."""
    if args.feedback is not None and args.suite != "hotpotqa":
        raise UserError(
            f"--feedback {args.feedback}: only hotpotqa has this setting, not {args.suite}; "
            "drop --feedback"
        )
    return args.feedback or "em"


def selection_of(args: argparse.Namespace) -> dict[str, Any]:
    """A suite's selection as a run's manifest records it (the task ids are added by the
    command: `run` in its order, `bench` in its seeded one)."""
    return {
        "suite": args.suite,
        "data": args.data,
        "feedback": feedback_of(args) if args.suite == "hotpotqa" else None,
        "network": bool(args.network),
        "seed": args.seed,
    }
