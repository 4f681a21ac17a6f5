"""The parsed flags of a command, checked before its handler runs: numbers in range, known
strategies and embeddings, usable output paths, tools `attempt` can use."""

from __future__ import annotations

import argparse
from pathlib import Path

from mulligan import strategies as registry
from mulligan.errors import UserError
from mulligan.inputs.paths import output_directory
from mulligan.settings.fields import bounded_flags, problem_of
from mulligan.settings.sections import embedding_problem


def check_flags(args: argparse.Namespace) -> None:
    """Numbers in range, known strategies and embeddings, usable output paths."""
    for dest, one in bounded_flags().items():
        value = getattr(args, dest, None)
        problem = None if value is None else problem_of(one, value)
        if problem:
            raise UserError(f"{one.option} {value}: {problem}")
    if getattr(args, "strategy", None) is not None:
        registry.for_solve(args.strategy)  # a known name (or solve's auto)
    if getattr(args, "strategies", None) is not None:
        # each known with its options, and one the loop runs (not `patch`: only solve runs it)
        for chosen in registry.parse(args.strategies, "--strategies"):
            registry.for_loop(chosen.name, "--strategies")
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
