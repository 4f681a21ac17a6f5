"""The parsed flags of a command, checked before its handler runs: numbers in range, known
strategies and embeddings, usable output paths, tools `attempt` can use."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mulligan.defaults import MAX_CHECK_SECONDS
from mulligan.errors import UserError
from mulligan.inputs.embedding import embedding_problem
from mulligan.inputs.paths import output_directory

MAX_CONCURRENCY = 256


@dataclass(frozen=True)
class Bound:
    minimum: float
    maximum: float = math.inf
    what: str = "a whole number"
    above_minimum: bool = False
    """The minimum itself is not allowed (a positive number of seconds)."""

    def problem(self, value: float) -> str | None:
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite {self.what.removeprefix('a ')}"
        low = value <= self.minimum if self.above_minimum else value < self.minimum
        if low or value > self.maximum:
            least = "above" if self.above_minimum else "at least"
            upper = "" if math.isinf(self.maximum) else f" and at most {self.maximum:g}"
            return f"must be {self.what} {least} {self.minimum:g}{upper}"
        return None


POSITIVE_INT = Bound(1)
NON_NEGATIVE_INT = Bound(0)
POSITIVE = Bound(0, what="a number", above_minimum=True)
NON_NEGATIVE = Bound(0, what="a number")

FLAG_BOUNDS: dict[str, Bound] = {
    "max_steps": POSITIVE_INT,
    "max_tokens": POSITIVE_INT,
    "max_format_errors": POSITIVE_INT,
    "max_repeats": POSITIVE_INT,
    "max_reply_tokens": POSITIVE_INT,
    "max_seconds": POSITIVE,
    "max_cost": NON_NEGATIVE,
    "timeout": POSITIVE,
    "temperature": Bound(0, 2, "a number"),
    "trials": POSITIVE_INT,
    "passes": POSITIVE_INT,
    "concurrency": Bound(1, MAX_CONCURRENCY),
    "validate_after": POSITIVE_INT,
    "refute_after": POSITIVE_INT,
    "lesson_ttl_days": Bound(0, 36500, "a number of days", above_minimum=True),
    "compress_at": POSITIVE_INT,
    "keep_recent": NON_NEGATIVE_INT,
    "summary_cap": POSITIVE_INT,
    "context_window": POSITIVE_INT,
    "carried_reflections": NON_NEGATIVE_INT,
    "limit": POSITIVE_INT,
    "sample": POSITIVE_INT,
    "k": POSITIVE_INT,
    "check_timeout": Bound(0, MAX_CHECK_SECONDS, "a number of seconds", above_minimum=True),
    "price_in": NON_NEGATIVE,
    "price_out": NON_NEGATIVE,
}
"""Every numeric flag of every command (by argparse dest) and the values it accepts."""


def flag_name(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_flags(args: argparse.Namespace) -> None:
    """Numbers in range, known strategies and embeddings, usable output paths."""
    for dest, bound in FLAG_BOUNDS.items():
        value = getattr(args, dest, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            problem = bound.problem(value)
            if problem:
                raise UserError(f"{flag_name(dest)} {value}: {problem}")
    if getattr(args, "strategy", None) is not None:
        strategies([args.strategy], "--strategy")
    if getattr(args, "strategies", None) is not None:
        strategies(args.strategies.split(","), "--strategies")
    if getattr(args, "embedding", None):
        problem = embedding_problem(args.embedding)
        if problem:
            raise UserError(f"--embedding {args.embedding}: {problem}")
    if getattr(args, "command", None) in ("bench", "report", "demo"):
        output_directory(Path(args.out), "--out")
    if getattr(args, "command", None) == "attempt":
        attempt_tools(args.tools or "", Path(args.workspace))


def attempt_tools(names: str, workspace: Path) -> None:
    from mulligan.actor.builtin_tools import BUILTIN_TOOLS

    for name in (n.strip() for n in names.split(",") if n.strip()):
        if name not in BUILTIN_TOOLS or name in ("search", "lookup"):
            usable = ", ".join(t for t in BUILTIN_TOOLS if t not in ("search", "lookup"))
            raise UserError(f"--tools: {name!r} is not a tool `attempt` can use; use {usable}")
    if not workspace.is_dir():
        raise UserError(f"--workspace {workspace}: not a directory; pass an existing directory")


def strategies(names: Iterable[str], flag: str) -> list[str]:
    from mulligan import strategies as registry

    return [s.name for s in registry.parse(",".join(names), flag)]
