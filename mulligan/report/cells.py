"""A run's task grid: for each task and strategy, what happened, from the report's own
numbers (`stats.collect`: the trial whose submitted answer passed) and its paired
comparison (`paired.discordant`: the tasks only one of two strategies solved)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mulligan.report.paired import discordant, pair_table
from mulligan.report.stats import RunStats, StrategyStats, pass_and_repeat, unit_of
from mulligan.report.tables import submitted_passed

OUTCOMES: dict[str, str] = {
    "solved": "its trial 1 answer passed",
    "rescued": "trial 1 failed, a later trial's answer passed",
    "regressed": "unsolved where the baseline solved it",
    "never": "no submitted answer passed",
    "not run": "no finished episode",
}
"""Each cell's outcome and what it means."""


@dataclass(frozen=True)
class Cell:
    outcome: str
    trial: int | None = None
    """The trial whose submitted answer passed (solved, rescued)."""
    episode_id: str | None = None
    gained: bool = False
    """Solved where the baseline did not (the other side of a discordant pair)."""


@dataclass(frozen=True)
class Discordance:
    """One strategy against the baseline, on the tasks only one of them solved."""

    label: str
    only_baseline: list[str]
    only_this: list[str]
    both: int = 0
    neither: int = 0
    p: float = 1.0
    """Exact McNemar p on the discordant tasks (the report adds a bootstrap interval)."""


@dataclass
class Grid:
    labels: list[str]
    baseline: str
    rows: list[tuple[str, dict[str, Cell]]] = field(default_factory=list)
    discordances: list[Discordance] = field(default_factory=list)

    def filtered(self, outcome: str = "", strategy: str = "") -> Grid:
        """The columns of `strategy` (all if empty), the rows where one of them has
        `outcome` (all if empty)."""
        labels = [label for label in self.labels if not strategy or label == strategy]
        rows = [
            (task, {label: cells[label] for label in labels})
            for task, cells in self.rows
            if not outcome or any(cells[label].outcome == outcome for label in labels)
        ]
        return Grid(labels, self.baseline, rows, self.discordances)

    def counts(self) -> dict[str, dict[str, int]]:
        """Per strategy, how many cells have each outcome."""
        found = {label: dict.fromkeys(OUTCOMES, 0) for label in self.labels}
        for _, cells in self.rows:
            for label, cell in cells.items():
                found[label][cell.outcome] += 1
        return found


def episode_ids(rows: list[dict[str, object]]) -> dict[tuple[str, int, str], str]:
    """(strategy, pass, task) -> episode id, from the log's episode rows (the task of a later
    repeat as the report keys it, `unit_of`)."""
    found = {}
    for row in rows:
        eid, task_id = str(row["id"]), str(row["task_id"])
        run_pass, repeat = pass_and_repeat(eid, task_id)
        found[(str(row["strategy"]), run_pass, unit_of(task_id, repeat))] = eid
    return found


def build_grid(stats: RunStats, ids: dict[tuple[str, int, str], str]) -> Grid:
    """The grid against the run's first strategy (its baseline)."""
    base = stats.strategies[0] if stats.strategies else None
    grid = Grid([s.label for s in stats.strategies], base.label if base else "")
    if base is None:
        return grid
    base_passed = submitted_passed(base)
    lost: dict[str, set[str]] = {}
    won: dict[str, set[str]] = {}
    for s in stats.strategies:
        if s is base:
            continue
        passed = submitted_passed(s)
        only_base, only_this = discordant(base_passed, passed)
        table = pair_table(base_passed, passed)
        grid.discordances.append(
            Discordance(s.label, only_base, only_this, table.both, table.neither, table.p)
        )
        lost[s.label], won[s.label] = set(only_base), set(only_this)
    tasks = list(dict.fromkeys(stats.task_ids + [t for s in stats.strategies for t in s.solved_at]))
    for task in tasks:
        cells = {}
        for s in stats.strategies:
            cells[s.label] = _cell(s, task, ids, task in lost.get(s.label, ()),
                                   task in won.get(s.label, ()))  # fmt: skip
        grid.rows.append((task, cells))
    return grid


def _cell(
    s: StrategyStats, task: str, ids: dict[tuple[str, int, str], str], lost: bool, won: bool
) -> Cell:
    episode = ids.get((s.strategy, s.run_pass, task))
    if task not in s.solved_at:
        return Cell("not run", episode_id=episode)
    trial = s.solved_at[task]
    if trial:
        return Cell("solved" if trial == 1 else "rescued", trial, episode, gained=won)
    return Cell("regressed" if lost else "never", episode_id=episode)
