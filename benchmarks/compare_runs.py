"""Paired comparison of strategies across bench runs, on the tasks both finished.

A bench report pairs the strategies of one run. When a strategy ran as a run of its own
(the same suite, sample and seed; for example reflexion-memory on a second server), this
prints the same paired table across runs: tasks both solved, only A, only B, neither,
the exact McNemar p and a seeded bootstrap 95% interval for B - A, at the last trial and
at trial 1.

    python benchmarks/compare_runs.py OUT1/memory/episodes.db:RUN1 OUT2/memory/episodes.db:RUN2
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from mulligan.bench.paired import bootstrap_difference, mcnemar_exact, pair_table
from mulligan.bench.stats import StrategyStats, collect
from mulligan.memory.log import EpisodeLog


def strategies(spec: str) -> list[StrategyStats]:
    path, _, run_id = spec.rpartition(":")
    return [s for s in collect(EpisodeLog(Path(path)), run_id).strategies if s.tasks]


def solved(s: StrategyStats, by_trial: int | None) -> dict[str, bool]:
    return {
        task: trial is not None and (by_trial is None or trial <= by_trial)
        for task, trial in s.solved_at.items()
    }


def row(a: StrategyStats, b: StrategyStats, by_trial: int | None) -> str:
    sa, sb = solved(a, by_trial), solved(b, by_trial)
    table = pair_table(sa, sb)
    common = [t for t in sa if t in sb]
    low, high = bootstrap_difference([sa[t] for t in common], [sb[t] for t in common])
    diff = (table.only_b - table.only_a) / table.n * 100 if table.n else 0.0
    when = "trial 1" if by_trial == 1 else "last trial"
    return (
        f"| {a.label} | {b.label} | {when} | {table.n} | {table.both} | {table.only_a} | "
        f"{table.only_b} | {table.neither} | {mcnemar_exact(table.only_a, table.only_b):.3f} | "
        f"{diff:+.0f} pts [{low * 100:+.0f}, {high * 100:+.0f}] |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="LOG:RUN_ID, an episodes.db and a run id")
    args = parser.parse_args()
    found = [s for spec in args.runs for s in strategies(spec)]
    print("| A | B | at | n | both | only A | only B | neither | McNemar p | B − A (95% CI) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for a, b in itertools.combinations(found, 2):
        for by_trial in (None, 1):
            print(row(a, b, by_trial))


if __name__ == "__main__":
    main()
