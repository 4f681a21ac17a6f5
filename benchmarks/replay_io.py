"""What the replay scripts share: their arguments (a run's episode log and id, and an outcome
file to rewrite), the checks on them, and the rewriting of one strategy's outcome lines."""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mulligan.memory.log import UnreadableLog

T = TypeVar("T")


def replay_parser(doc: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("log", help="the run's episodes.db")
    parser.add_argument("run_id")
    parser.add_argument("--outcomes", help="the run's outcomes.jsonl, to rewrite")
    parser.add_argument("--write", help="where the rewritten outcomes go (with --outcomes)")
    return parser


def read_logged(
    parser: argparse.ArgumentParser, args: argparse.Namespace, read: Callable[[], dict[str, T]],
    strategy: str,
) -> dict[str, T]:  # fmt: skip
    """`read()` on a checked log: each problem named, with how to fix it."""
    if bool(args.outcomes) != bool(args.write):
        parser.error("--outcomes and --write go together")
    if not Path(args.log).is_file():
        parser.error(f"{args.log}: no such file; pass a run's episode log, OUT/memory/episodes.db")
    try:
        runs = read()
    except (sqlite3.DatabaseError, UnreadableLog) as error:
        parser.error(f"{args.log}: not an episode log ({error}); pass OUT/memory/episodes.db")
    if not runs:
        raise SystemExit(f"{args.log}: no {strategy} episode of run {args.run_id}")
    return runs


def rewrite_lines(
    source: str, target: str, strategy: str, change: Callable[[dict[str, Any]], bool]
) -> int:
    """The source's outcome lines of one strategy that `change` rewrote in place (it returns
    False for a task it has nothing for), written to the target; how many."""
    lines = []
    with open(source, encoding="utf-8") as handle:
        for line in handle:
            outcome = json.loads(line)
            if outcome["strategy"] == strategy and change(outcome):
                lines.append(json.dumps(outcome))
    with open(target, "w", encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in lines)
    return len(lines)
