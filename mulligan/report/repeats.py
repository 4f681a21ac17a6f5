"""A study run several times over (`bench --repeats K`): each strategy's score in every
repeat, their mean and spread, and how reliably each task was solved (pass^k) against how
often at all (pass@k).

Over n repeats of a task of which c solved it, the unbiased estimators of the chance that k
repeats drawn from the n all solved it, and that at least one did:

    pass^k = C(c, k) / C(n, k)            (tau-bench, Yao et al. 2024)
    pass@k = 1 - C(n - c, k) / C(n, k)    (HumanEval, Chen et al. 2021)

averaged over the tasks that every repeat finished. At k = n they count the tasks solved in
every repeat and in any; at k = 1 both are the mean success rate. Pure functions on the
report's numbers, so the figures can be checked by hand."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from mulligan.report.stats import RunStats, StrategyStats

Table = tuple[list[str], list[list[str]]]
"""A table's header and rows."""
Block = str | Table
"""A paragraph, or a table."""

NOTE = (
    "The whole study ran {k} times over, each repeat drawing its own attempts (trial 1 and any "
    "self-tests too) on the same tasks in the same order. Over the tasks every repeat "
    "finished: solved in each repeat, the tasks whose submitted answer passed; mean ± sample "
    "standard deviation across the repeats; pass^k, the chance that k repeats drawn from the "
    "{k} all solved a task (reliability) and pass@k that at least one did (C(c, k) / C(n, k) and "
    "1 − C(n − c, k) / C(n, k) for c of n repeats solved, averaged over the tasks): pass^{k} "
    "counts the tasks solved every time, pass@{k} those solved at all. Every other table pools "
    "the repeats: each task in each repeat is one row of a strategy's n, and the paired tests "
    "pair two strategies' attempts at a task in the same repeat (McNemar's test counts those "
    "pairs as independent, which repeats of one task are not: read its p as a lower bound; the "
    "bootstrap interval resamples whole tasks with all their repeats)."
)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The chance that k of the n repeats, drawn without replacement, all solved the task."""
    return math.comb(c, k) / math.comb(n, k) if 0 < k <= n else 0.0


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k of the n repeats, drawn without replacement,
    solved the task."""
    return 1 - math.comb(n - c, k) / math.comb(n, k) if 0 < k <= n else 0.0


@dataclass(frozen=True)
class RepeatSummary:
    label: str
    solved: list[int]
    """Of the tasks every repeat finished, those whose submitted answer passed, in repeat 1,
    2, ... (a task an unfinished run has in some repeats only counts in none)."""
    tasks: int
    """Tasks every repeat finished (the estimators' tasks)."""
    pass_at: list[float]
    """pass@k for k = 1, 2, ... repeats."""
    pass_hat: list[float]
    """pass^k for k = 1, 2, ... repeats."""

    @property
    def mean(self) -> float:
        return statistics.fmean(self.solved) if self.solved else 0.0

    @property
    def sd(self) -> float:
        """The sample standard deviation across repeats (0 with one)."""
        return statistics.stdev(self.solved) if len(self.solved) > 1 else 0.0


def by_repeat(s: StrategyStats, repeats: int) -> dict[str, list[bool]]:
    """Per task every repeat finished: whether its submitted answer passed, repeat by repeat."""
    found: dict[str, dict[int, bool]] = {}
    for unit, (task, repeat) in s.units.items():
        found.setdefault(task, {})[repeat] = s.submitted[unit][-1]
    return {
        task: [passed[r] for r in range(1, repeats + 1)]
        for task, passed in found.items()
        if len(passed) == repeats
    }


def summary(s: StrategyStats, repeats: int) -> RepeatSummary:
    outcomes = by_repeat(s, repeats)
    counts = [sum(runs) for runs in outcomes.values()]
    ks = range(1, repeats + 1)

    def mean(estimate: list[float]) -> float:
        return statistics.fmean(estimate) if estimate else 0.0

    return RepeatSummary(
        label=s.label,
        solved=[sum(runs[repeat - 1] for runs in outcomes.values()) for repeat in ks],
        tasks=len(outcomes),
        pass_at=[mean([pass_at_k(repeats, c, k) for c in counts]) for k in ks],
        pass_hat=[mean([pass_hat_k(repeats, c, k) for c in counts]) for k in ks],
    )


def repeat_summaries(stats: RunStats) -> list[RepeatSummary]:
    """Each strategy that finished a task (none when the study ran once)."""
    if stats.repeats <= 1:
        return []
    return [summary(s, stats.repeats) for s in stats.strategies if s.tasks]


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%"


def repeat_rows(stats: RunStats) -> Table:
    k = stats.repeats
    header = ["strategy", "tasks", "solved in each repeat", "mean ± sd"]
    header += [f"pass@{n}" for n in range(1, k + 1)] + [f"pass^{n}" for n in range(1, k + 1)]
    rows = []
    for r in repeat_summaries(stats):
        row = [r.label, str(r.tasks), ", ".join(str(n) for n in r.solved)]
        if not r.tasks:  # no task finished in every repeat yet: nothing to estimate
            rows.append(row + ["–"] * (1 + 2 * k))
            continue
        spread = (
            f"{r.mean:.1f} ± {r.sd:.1f} "
            f"({_percent(r.mean / r.tasks)} ± {100 * r.sd / r.tasks:.0f} pts)"
        )
        rows.append(
            [*row, spread] + [_percent(v) for v in r.pass_at] + [_percent(v) for v in r.pass_hat]
        )
    return header, rows


def blocks(stats: RunStats) -> list[Block]:
    """The report's section on repeats (nothing when the study ran once)."""
    table = repeat_rows(stats)
    if not table[1]:
        return []
    return [NOTE.format(k=stats.repeats), table]


def task_cell(s: StrategyStats, task: str) -> str:
    """A task's cell in the per-task table of a repeated study."""
    runs = [unit for unit, (t, _) in s.units.items() if t == task]
    solved = sum(1 for unit in runs if s.submitted[unit][-1])
    return f"solved in {solved} of {len(runs)} repeats" if runs else "not run"
