"""Paired comparison of strategies across bench runs, on the tasks both finished.

A bench report pairs the strategies of one run. When a strategy ran as a run of its own
(the same suite, sample and seed; for example reflexion-memory on a second server), this
prints the same paired table across runs: tasks both solved, only A, only B, neither,
the exact McNemar p and a seeded bootstrap 95% interval for B - A (the report's: seeded
with --seed, the run's), with the whole trial budget and with one trial (the answer each
submitted, as the report scores it).

    python benchmarks/compare_runs.py OUT1/memory/episodes.db:RUN1 OUT2/memory/episodes.db:RUN2
    python benchmarks/compare_runs.py OUT1/outcomes.jsonl OUT2/outcomes.jsonl

A run is named by its episode log and id, or by the outcomes.jsonl its `mulligan report`
wrote (which outlives the log: keep it with a study's write-up).

`--pool` joins runs over different tasks into one (a study extended by the next tasks of
the same seeded sample, say): each strategy's tasks from every run, refused when two runs
hold the same task; then one line per strategy (solved, tokens per task) and the table.

    python benchmarks/compare_runs.py --pool FIRST40.outcomes.jsonl NEXT40.outcomes.jsonl

`--budget K` scores every strategy as the same run with K trials would have: what its
honest stop submitted by trial K (a study run with N = 5 read at N = 3 too).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from mulligan.errors import UserError
from mulligan.memory.log import EpisodeLog
from mulligan.report.outcomes import read_outcomes
from mulligan.report.paired import PAIRED_HEADER, paired_cells
from mulligan.report.stats import StrategyStats, collect
from mulligan.report.tables import submitted_passed


def strategies(spec: str) -> list[tuple[str, StrategyStats]]:
    """(run id, numbers) per strategy of the run `spec` names."""
    if spec.endswith(".jsonl") and Path(spec).is_file():
        return [(run, s) for run, s in read_outcomes(Path(spec)) if s.tasks]
    path, _, run_id = spec.rpartition(":")
    if not path or not Path(path).is_file():
        raise UserError(f"{spec}: name a run as EPISODES_DB:RUN_ID or an outcomes.jsonl file")
    return [(run_id, s) for s in collect(EpisodeLog(Path(path)), run_id).strategies if s.tasks]


def pooled(found: list[tuple[str, StrategyStats]]) -> list[tuple[str, StrategyStats]]:
    """One StrategyStats per strategy, holding its tasks from every run (disjoint)."""
    joined: dict[str, tuple[list[str], StrategyStats]] = {}
    for run, s in found:
        if s.label not in joined:
            joined[s.label] = ([run], StrategyStats(s.strategy, s.run_pass))
        runs, into = joined[s.label]
        if run not in runs:
            runs.append(run)
        twice = sorted(into.submitted.keys() & s.submitted.keys())
        if twice:
            raise UserError(
                f"--pool: {s.label} has task(s) {', '.join(twice[:3])} in two runs; pool runs "
                "over different tasks, or compare them without --pool"
            )
        into.submitted.update(s.submitted)
        into.any_passed.update(s.any_passed)
        into.spent.update(s.spent)
        into.tasks = len(into.submitted)
    return [("+".join(runs), into) for runs, into in joined.values()]


def summary(s: StrategyStats, budget: int | None) -> str:
    at = (budget or 0) - 1
    solved = sum(passed[at] for passed in s.submitted.values())
    reached = sum(passed[at] for passed in s.any_passed.values())
    tokens = sum(spent[at] for spent in s.spent.values()) / max(1, s.tasks)
    within = f" with a budget of {budget}" if budget else ""
    return (
        f"{s.label}: {solved}/{s.tasks} submitted answers passed{within}, some attempt passed "
        f"on {reached}, {tokens:,.0f} tokens a task"
    )


def check_budget(found: list[tuple[str, StrategyStats]], budget: int | None) -> None:
    """A budget no run reached cannot be read out of it."""
    trials = min((len(p) for _, s in found for p in s.submitted.values()), default=0)
    if budget is not None and not 1 <= budget <= trials:
        raise UserError(f"--budget {budget}: the runs have {trials} trials; give 1 to {trials}")


def row(
    a: StrategyStats, b: StrategyStats, by_trial: int | None, labels: tuple[str, str], seed: int
) -> str:
    cells = paired_cells(submitted_passed(a, by_trial), submitted_passed(b, by_trial), seed)
    when = {None: "last trial", 1: "trial 1"}.get(by_trial, f"{by_trial} trials")
    return f"| {labels[0]} | {labels[1]} | {when} | {' | '.join(cells)} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="LOG:RUN_ID (an episodes.db and a run id) or "
                        "an outcomes.jsonl")  # fmt: skip
    parser.add_argument(
        "--seed",
        type=int,
        default=1,
        help="the bootstrap's seed; a report "
        "seeds it with the run's --seed (default 1, as the studies ran)",
    )
    parser.add_argument("--pool", action="store_true", help="join runs over different tasks")
    parser.add_argument(
        "--budget",
        type=int,
        metavar="K",
        help="score each strategy as with K trials (default: the run's own)",
    )
    args = parser.parse_args()
    try:
        found = [found for spec in args.runs for found in strategies(spec)]
        if args.pool:
            found = pooled(found)
        check_budget(found, args.budget)
    except UserError as exc:
        print(f"compare_runs: {exc}", file=sys.stderr)
        return 2
    if args.pool or args.budget:
        print("\n".join(summary(s, args.budget) for _, s in found) + "\n")
    several = len({run for run, _ in found}) > 1
    header = [*PAIRED_HEADER[:2], "at", *PAIRED_HEADER[2:]]
    print(f"| {' | '.join(header)} |\n|{'---|' * len(header)}")
    for (run_a, a), (run_b, b) in itertools.combinations(found, 2):
        labels = (f"{a.label} ({run_a})", f"{b.label} ({run_b})") if several else (a.label, b.label)
        for by_trial in dict.fromkeys((args.budget, 1)):
            print(row(a, b, by_trial, labels, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
