"""Paired statistics: two strategies on the same tasks, compared task by task.

Pure functions on per-task outcomes, so the figures can be checked by hand.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class PairTable:
    """How many tasks A and B solved, counted task by task (the tasks both ran)."""

    both: int
    only_a: int
    only_b: int
    neither: int

    @property
    def n(self) -> int:
        return self.both + self.only_a + self.only_b + self.neither

    @property
    def p(self) -> float:
        """The exact McNemar p of the tasks only one solved."""
        return mcnemar_exact(self.only_a, self.only_b)

    @property
    def difference(self) -> float:
        """B's success rate less A's (0 with no task)."""
        return (self.only_b - self.only_a) / self.n if self.n else 0.0


def discordant(a: dict[str, bool], b: dict[str, bool]) -> tuple[list[str], list[str]]:
    """The tasks both ran that only A solved, and those only B solved, in A's order."""
    common = [task for task in a if task in b]
    return [t for t in common if a[t] and not b[t]], [t for t in common if b[t] and not a[t]]


def pair_table(a: dict[str, bool], b: dict[str, bool]) -> PairTable:
    common = [task for task in a if task in b]
    only_a, only_b = discordant(a, b)
    return PairTable(
        both=sum(1 for t in common if a[t] and b[t]),
        only_a=len(only_a),
        only_b=len(only_b),
        neither=sum(1 for t in common if not a[t] and not b[t]),
    )


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Exact McNemar test: the two-sided binomial p-value of the discordant pairs.

    Under "no difference" each discordant task is equally likely to favour A or B, so
    p = P(X <= min) + P(X >= max) for X ~ Binomial(only_a + only_b, 1/2), capped at 1.
    """
    n = only_a + only_b
    if n == 0:
        return 1.0
    low = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(low + 1)) / 2**n
    return min(1.0, 2 * tail)


def bootstrap_difference(
    a: list[bool],
    b: list[bool],
    *,
    seed: int = 0,
    resamples: int = 2000,
    level: float = 0.95,
    clusters: list[str] | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval for (success rate of B) - (success rate of A).

    Tasks are resampled with replacement as pairs, so the pairing is kept; with `clusters`
    (each pair's task, where a repeated study has several pairs a task) whole tasks are
    resampled with all their pairs, as they are not independent. Seeded, so a report
    rebuilds to the same figures.
    """
    if len(a) != len(b):
        raise ValueError("paired outcomes need the same tasks on both sides")
    n = len(a)
    if n == 0:
        return 0.0, 0.0
    differences = [int(y) - int(x) for x, y in zip(a, b, strict=True)]
    rng = random.Random(seed)
    if clusters is None:
        means = sorted(sum(rng.choices(differences, k=n)) / n for _ in range(resamples))
    else:
        grouped: dict[str, list[int]] = {}
        for difference, cluster in zip(differences, clusters, strict=True):
            grouped.setdefault(cluster, []).append(difference)
        sums = [(sum(group), len(group)) for group in grouped.values()]
        drawn = (rng.choices(sums, k=len(sums)) for _ in range(resamples))
        means = sorted(sum(d for d, _ in draw) / sum(k for _, k in draw) for draw in drawn)
    tail = (1 - level) / 2
    low = means[max(0, math.floor(tail * resamples))]
    high = means[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]
    return low, high


def tokens_per_extra_success(
    tokens_a: int, tokens_b: int, solved_a: int, solved_b: int
) -> float | None:
    """Extra tokens B spent over A for each task more that B solved; None when B solved no
    more than A (then no number of tokens buys an extra success)."""
    extra = solved_b - solved_a
    if extra <= 0:
        return None
    return (tokens_b - tokens_a) / extra


PAIRED_HEADER = ["A", "B", "n", "both", "only A", "only B", "neither", "McNemar p"]
PAIRED_HEADER += ["B − A (95% bootstrap)"]


def p_text(p: float) -> str:
    """A p-value as the paired tables print it."""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def difference_interval(
    a: dict[str, bool],
    b: dict[str, bool],
    seed: int,
    units: dict[str, tuple[str, int]] | None = None,
) -> tuple[float, float]:
    """The paired bootstrap interval of B − A over the tasks both ran (in a repeated study,
    whole tasks resampled with their repeats: `units` gives each one's task)."""
    common = [task for task in a if task in b]
    units = units or {}
    repeated = any(repeat > 1 for _, repeat in units.values())
    clusters = [units.get(t, (t, 1))[0] for t in common] if repeated else None
    xs, ys = [a[t] for t in common], [b[t] for t in common]
    return bootstrap_difference(xs, ys, seed=seed, clusters=clusters)


def paired_cells(
    a: dict[str, bool],
    b: dict[str, bool],
    seed: int,
    units: dict[str, tuple[str, int]] | None = None,
) -> list[str]:
    """The cells of PAIRED_HEADER after A and B."""
    table = pair_table(a, b)
    low, high = difference_interval(a, b, seed, units)
    counts = [table.n, table.both, table.only_a, table.only_b, table.neither]
    return [*map(str, counts), p_text(table.p)] + [
        f"{100 * table.difference:+.0f} pts [{100 * low:+.0f}, {100 * high:+.0f}]"
    ]
