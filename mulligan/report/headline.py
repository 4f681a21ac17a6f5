"""The report's first lines: what ran (model and endpoint, suite and n, the stopping rule,
the strategies) and what it found, each strategy against the baselines in words and numbers.

The comparisons are the paired comparison table's own figures (paired.py on the submitted
answers, the bootstrap seeded by the run's seed), so the headline and the table agree."""

from __future__ import annotations

from dataclasses import dataclass

from mulligan import strategies
from mulligan.report.paired import difference_interval, p_text, pair_table
from mulligan.report.stats import RunStats, StrategyStats, logged_stop_rule
from mulligan.report.tables import submitted_passed
from mulligan.runs.lifecycle import configured

CLEAR = 0.05
"""A paired difference is clear when its exact McNemar p is below this and its bootstrap
interval excludes 0; no clear difference when neither holds; borderline otherwise."""


@dataclass(frozen=True)
class Comparison:
    """B against a baseline A, task by task over the tasks both finished."""

    name: str
    baseline: str
    n: int
    only_a: int
    only_b: int
    p: float
    low: float
    high: float

    @property
    def verdict(self) -> str:
        """The McNemar test and the bootstrap interval, read together."""
        excludes_zero = self.low > 0 or self.high < 0
        if self.p < CLEAR and excludes_zero:
            return "a clear difference"
        if self.p >= CLEAR and not excludes_zero:
            return "no clear difference"
        return "borderline (the McNemar test and the bootstrap interval disagree)"

    def sentence(self, first: bool) -> str:
        """'retry solved 3 more of 10 than react (+30 pts, 95% [+0, +60]), p = 0.25: no clear
        difference' (without the name when it is not the first of its line)."""
        net = self.only_b - self.only_a
        if net:
            count = f"{abs(net)} {'more' if net > 0 else 'fewer'} of {self.n} than {self.baseline}"
        else:
            count = f"as many of {self.n} as {self.baseline}"
        points = (
            f"{100 * net / self.n:+.0f} pts, 95% [{100 * self.low:+.0f}, {100 * self.high:+.0f}]"
        )
        solved = f"{self.name} solved " if first else ""
        return f"{solved}{count} ({points}), p = {p_text(self.p)}: {self.verdict}"


def compare(a: StrategyStats, b: StrategyStats, seed: int) -> Comparison | None:
    """None when the two finished no task in common."""
    xs, ys = submitted_passed(a), submitted_passed(b)
    table = pair_table(xs, ys)
    if not table.n:
        return None
    low, high = difference_interval(xs, ys, seed, {**a.units, **b.units})
    return Comparison(b.label, a.label, table.n, table.only_a, table.only_b, table.p, low, high)


def setup_line(stats: RunStats) -> str:
    """Model and endpoint, suite and n, trials and stopping rule, strategies."""
    m = stats.manifest
    model = configured(m, "endpoint", "model") or "an unnamed model"
    local = m.get("local_model")
    if isinstance(local, dict) and local.get("name"):
        model = f"{model} (file {local['name']})"
    endpoint = (
        m.get("endpoint") or configured(m, "endpoint", "base_url") or "an unrecorded endpoint"
    )
    n = len(stats.task_ids) or max((s.tasks for s in stats.strategies), default=0)
    runs = n * stats.repeats
    unfinished = [f"{s.label} {s.tasks} of {runs}" for s in stats.strategies if s.tasks < runs]
    tasks = f"{n} tasks" + (f" × {stats.repeats} repeats" if stats.repeats > 1 else "")
    finished = f" (finished: {', '.join(unfinished)})" if unfinished else ""
    trials = stats.trials
    rule = logged_stop_rule(stats.manifest).description.split(":")[0]
    names = ", ".join(s.label for s in stats.strategies)
    return (
        f"**{model}** at {endpoint} · suite **{m.get('suite', '?')}**, n = {tasks}{finished} · "
        f"up to {trials} trial{'s' * (trials > 1)} a task, {rule} · strategies: {names}."
    )


def score_line(stats: RunStats) -> str:
    scores = ", ".join(f"{s.label} {s.solved}/{s.tasks}" for s in stats.strategies if s.tasks)
    solved = f"Solved (the submitted answer passed, up to {stats.trials} trials)"
    return f"{solved}: {scores or 'nothing yet'}."


def comparison_lines(stats: RunStats) -> list[str]:
    """Each strategy against each baseline (react, retry) that ran beside it."""
    baselines = [
        s for s in stats.strategies if s.strategy in strategies.BASELINES and s.run_pass == 1
    ]
    lines = []
    for b in stats.strategies:
        found = [
            c
            for a in baselines
            if a is not b and not _said(a, b, baselines, stats)
            if (c := compare(a, b, stats.seed))
        ]
        if found:
            lines.append("; ".join(c.sentence(first=i == 0) for i, c in enumerate(found)) + ".")
    return lines


def _said(
    a: StrategyStats, b: StrategyStats, baselines: list[StrategyStats], stats: RunStats
) -> bool:
    """Two baselines are compared once, on the line of the one listed later."""
    return b in baselines and stats.strategies.index(b) < stats.strategies.index(a)


def headline(stats: RunStats) -> tuple[str, str, list[str]]:
    """The setup line, the score line and one comparison line per strategy."""
    return setup_line(stats), score_line(stats), comparison_lines(stats)
