"""What logged `solve` attempts spent on imagined text and on repeated calls, read offline.

    python benchmarks/solve_logs.py mulligan-bench/solve-real/runs

Reads every `memory/episodes.db` under the given directories (solve_real keeps one per
project and strategy) and prints, with today's code:

- how many text-protocol steps that acted wrote on past their first action (outputs the model
  imagined, more actions), and what share of their text that was: what `acted_on` now keeps
  out of the next prompt (a run with older code sent all of it back);
- how many attempts had `--max-repeats` (3) or more steps in a row of nothing but repeated
  calls, and how many steps those were: what the repeat limit now cuts short.

No model is called; the logs are only read.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from mulligan.actor.budget import BudgetSection
from mulligan.actor.text_protocol import acted_on
from mulligan.memory.log import EpisodeLog
from mulligan.schema import Attempt, Step


def attempts(roots: list[Path]) -> Iterator[Attempt]:
    for root in roots:
        for db in sorted(root.rglob("memory/episodes.db")):
            log = EpisodeLog(db)
            for row in log.episodes():
                episode = log.episode(row["id"])
                if episode is not None:
                    yield from episode.attempts


def only_repeats(step: Step) -> bool:
    return bool(step.results) and all(r.status == "repeated" for r in step.results)


def longest_run_of_repeats(attempt: Attempt) -> int:
    run = best = 0
    for step in attempt.steps:
        run = run + 1 if only_repeats(step) else 0
        best = max(best, run)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", type=Path, help="directories holding the memories")
    args = parser.parse_args(argv)
    limit = BudgetSection().max_repeats
    total = stuck = repeat_steps = steps = 0
    acting = ran_on = kept = dropped = 0
    for attempt in attempts(args.roots):
        total += 1
        steps += len(attempt.steps)
        if longest_run_of_repeats(attempt) >= limit:
            stuck += 1
            repeat_steps += sum(only_repeats(s) for s in attempt.steps)
        if attempt.protocol != "text":
            continue
        for step in attempt.steps:
            if step.tool_calls:
                acted, rest = acted_on(step.text + step.discarded)
                acting += 1
                ran_on += bool(rest.strip())
                kept, dropped = kept + len(acted), dropped + len(rest)
    if not total:
        print(f"no logged attempts under {', '.join(map(str, args.roots))}", file=sys.stderr)
        return 2
    share = dropped / (kept + dropped) if kept + dropped else 0.0
    print(f"{total} attempts, {steps} steps")
    print(f"text steps that acted: {acting}; went on past their action: {ran_on}")
    print(f"characters after the action: {dropped:,} of {kept + dropped:,} ({share:.0%})")
    print(f"attempts with {limit}+ steps in a row of only repeated calls: {stuck}")
    print(f"repeat-only steps in them: {repeat_steps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
