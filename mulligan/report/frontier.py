"""Success against cost: each strategy at its whole trial budget, the share of tasks whose
submitted answer passed against what it spent a task (tokens, seconds, and dollars where a
price is known), and the strategies no other beats on both, the Pareto frontier.

A strategy is dominated when another solved at least as large a share at no more cost, and
a larger share or at less cost; the frontier is every strategy none dominates (two alike
are both on it). Pure functions on the report's numbers, so they can be checked by hand."""

from __future__ import annotations

import html
from dataclasses import dataclass

from mulligan.report.stats import RunStats, StrategyStats
from mulligan.report.tables import Piece, images, priced

COSTS: dict[str, str] = {
    "tokens": "tokens per task",
    "seconds": "seconds per task",
    "dollars": "dollars per task",
}
"""What a task costs, each a frontier of its own: the name in file names, and in words."""
FORMS = {"tokens": "{:,.0f}", "seconds": "{:.2f}", "dollars": "{:.4f}"}

TITLE = "Success against cost"
NOTE = (
    "Each strategy at its whole trial budget: the share of tasks whose submitted answer passed "
    "against its mean cost a task. A strategy is dominated when another solved at least as "
    "many at no more cost, and more or for less; the frontier is the strategies none "
    "dominates. In the plots a dominated strategy is a hollow circle, and a square above a "
    "strategy marks its coverage, the tasks where some attempt it made passed (an oracle's "
    "pick among its draws; the success table's last column): the gap between the two is what "
    "its stopping or selection left unsubmitted."
)


@dataclass(frozen=True)
class Point:
    label: str
    success: float
    """The share of tasks whose submitted answer passed."""
    cost: float
    """Mean cost a task."""
    solved: int = 0
    tasks: int = 0
    covered: int = 0
    """Tasks where some attempt passed (coverage)."""


def dominates(a: Point, b: Point) -> bool:
    """`a` solves at least as large a share at no more cost, and more or for less."""
    better = a.success > b.success or a.cost < b.cost
    return a.success >= b.success and a.cost <= b.cost and better


def frontier(points: list[Point]) -> list[str]:
    """The labels no other point dominates, in the order given."""
    return [p.label for p in points if not any(dominates(q, p) for q in points)]


def dominators(points: list[Point]) -> dict[str, list[str]]:
    """Each dominated label, and the labels that dominate it (in the order given)."""
    found = {p.label: [q.label for q in points if dominates(q, p)] for p in points}
    return {label: by for label, by in found.items() if by}


def cost_of(s: StrategyStats, cost: str) -> float | None:
    """Mean cost a task (None: dollars with no known price)."""
    if cost == "tokens":
        return s.per_task(s.tokens)
    if cost == "seconds":
        return s.per_task(s.seconds)
    return None if s.cost is None else s.per_task(s.cost)


def points(stats: RunStats, cost: str) -> list[Point]:
    """The strategies that finished a task and whose cost is known (dollars: none when
    nothing is priced)."""
    if cost == "dollars" and not priced(stats):
        return []
    found = []
    for s in stats.strategies:
        spent = cost_of(s, cost)
        if s.tasks and spent is not None:
            covered = s.any_by_trial[-1] if s.any_by_trial else 0
            found.append(Point(s.label, s.solved / s.tasks, spent, s.solved, s.tasks, covered))
    return found


def drawn(stats: RunStats) -> list[str]:
    """The costs with a frontier to plot."""
    return [cost for cost in COSTS if points(stats, cost)]


def _where(p: Point, cost: str) -> str:
    return f"{p.solved}/{p.tasks} at {FORMS[cost].format(p.cost)}"


def frontier_line(stats: RunStats, cost: str) -> str:
    """'tokens per task: on the frontier react (1/2 at 100), ...; dominated: ...'."""
    found = points(stats, cost)
    if not found:
        return f"{COSTS[cost]}: not priced, so no frontier in dollars"
    by_label = {p.label: p for p in found}
    on = ", ".join(f"{label} ({_where(by_label[label], cost)})" for label in frontier(found))
    beaten = [
        f"{label} ({_where(by_label[label], cost)}, by {', '.join(by)})"
        for label, by in dominators(found).items()
    ]
    unknown = [s.label for s in stats.strategies if s.tasks and cost_of(s, cost) is None]
    line = f"{COSTS[cost]}: on the frontier {on}; dominated: {', '.join(beaten) or 'none'}"
    return line + (f"; price unknown: {', '.join(unknown)}" if unknown else "")


def frontier_lines(stats: RunStats) -> list[str]:
    """One line a cost; nothing when no strategy finished a task."""
    if not any(s.tasks for s in stats.strategies):
        return []
    return [frontier_line(stats, cost) + "." for cost in COSTS]


def section(stats: RunStats) -> Piece:
    """The report's section: the note, a line a cost, the plots."""
    lines = frontier_lines(stats)
    if not lines:
        return [], []
    md, page = images({f"frontier_{c}.svg": f"success against {c}" for c in drawn(stats)})
    said = [f"## {TITLE}", "", NOTE, "", *(f"- {line}" for line in lines), ""]
    listed = [f"<h2>{TITLE}</h2>", f"<p>{html.escape(NOTE)}</p>", "<ul>"]
    listed += [f"<li>{html.escape(line)}</li>" for line in lines]
    return said + md, [*listed, "</ul>", *page]
