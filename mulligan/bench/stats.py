"""Numbers for the report, computed from the episode log alone."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any

from mulligan.errors import UserError
from mulligan.memory.log import EpisodeLog
from mulligan.schema import Episode, Role, Usage, add_by_role


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a proportion (95% by default)."""
    if n == 0:
        return 0.0, 0.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class StrategyStats:
    strategy: str
    run_pass: int
    tasks: int = 0
    solved_by_trial: list[int] = field(default_factory=list)
    """Cumulative: tasks solved at or before trial t (index t - 1)."""
    attempts: int = 0
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    """Dollars, every role; None when some call's price is unknown."""
    by_role: dict[Role, Usage] = field(default_factory=dict)
    """The same usage split by role (actor, summariser, reflector, judge)."""
    unmetered_calls: int = 0
    """Calls that timed out after they were sent: their tokens are in no count here."""
    seconds: float = 0.0
    lessons: dict[str, int] = field(default_factory=dict)
    solved_at: dict[str, int | None] = field(default_factory=dict)
    failed_first: int = 0
    """Tasks whose trial 1 failed."""
    rescued: int = 0
    """Of those, tasks a later trial solved."""
    later_trials: int = 0
    """Trials after the first."""
    repeated_answers: int = 0
    """Later trials whose answer was the previous trial's answer again, whitespace aside."""

    @property
    def label(self) -> str:
        return self.strategy if self.run_pass == 1 else f"{self.strategy} (pass {self.run_pass})"

    @property
    def solved(self) -> int:
        return self.solved_by_trial[-1] if self.solved_by_trial else 0

    def per_task(self, value: float) -> float:
        return value / self.tasks if self.tasks else 0.0

    @property
    def tokens_per_success(self) -> float | None:
        total = self.prompt_tokens + self.completion_tokens
        return total / self.solved if self.solved else None

    @property
    def cost_per_success(self) -> float | None:
        """None with no success or an unknown price."""
        return self.cost / self.solved if self.solved and self.cost is not None else None

    def add(self, usage: Usage, by_role: dict[Role, Usage]) -> None:
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.unmetered_calls += usage.unmetered_calls
        self.cost = (Usage(cost=self.cost) + usage).cost
        self.by_role = add_by_role(self.by_role, by_role)


@dataclass
class RunStats:
    run_id: str
    manifest: dict[str, Any]
    started_at: float
    ended_at: float | None
    status: str
    strategies: list[StrategyStats]
    task_ids: list[str]


def collect(log: EpisodeLog, run_id: str) -> RunStats:
    run = log.run(run_id)
    if run is None:
        raise UserError(
            f"no run {run_id!r} in {log.path}; `mulligan report` lists nothing to rebuild"
        )
    manifest = json.loads(run["manifest"])
    trials = int(manifest.get("trials", 1))
    rows = log.episodes(run_id)
    order = manifest.get("task_order") or sorted({r["task_id"] for r in rows})
    groups: dict[tuple[str, int], StrategyStats] = {}
    for strategy in manifest.get("strategies", []):
        for run_pass in range(1, int(manifest.get("passes", 1)) + 1):
            groups[(strategy, run_pass)] = StrategyStats(strategy, run_pass)
    events = _lesson_events_by_episode(log)
    for row in sorted(rows, key=lambda r: (r["position"], r["id"])):
        run_pass = int(row["id"].rsplit(":pass", 1)[1]) if ":pass" in row["id"] else 1
        stats = groups.setdefault(
            (row["strategy"], run_pass), StrategyStats(row["strategy"], run_pass)
        )
        episode = log.episode(row["id"])
        if episode is None or not row["ended_at"]:
            continue  # unfinished: not counted until resumed
        stats.tasks += 1
        first_pass = next(
            (a.trial for a, v in zip(episode.attempts, episode.verdicts, strict=False) if v.passed),
            None,
        )
        stats.solved_at[episode.task_id] = first_pass
        for attempt in episode.attempts:
            stats.attempts += 1
            stats.steps += len(attempt.steps)
            stats.add(attempt.usage, attempt.usage_by_role)
            stats.seconds += attempt.seconds
        count_later_trials(stats, episode)
        stats.lessons["written"] = stats.lessons.get("written", 0) + len(episode.lessons_written)
        for event in events.get(episode.id, []):
            key = {
                "retrieved": "retrieved",
                "status:validated": "validated",
                "status:refuted": "refuted",
            }.get(event)
            if key:
                stats.lessons[key] = stats.lessons.get(key, 0) + 1
    for stats in groups.values():  # react stays flat after trial 1: it has no later trials
        stats.solved_by_trial = [
            sum(1 for t in stats.solved_at.values() if t is not None and t <= trial)
            for trial in range(1, max(trials, 1) + 1)
        ]
    return RunStats(
        run_id=run_id,
        manifest=manifest,
        started_at=run["started_at"],
        ended_at=run["ended_at"],
        status=run["status"],
        strategies=list(groups.values()),
        task_ids=list(order),
    )


def same_answer(a: str | None, b: str | None) -> bool:
    return " ".join((a or "").split()) == " ".join((b or "").split())


def count_later_trials(stats: StrategyStats, episode: Episode) -> None:
    """What the trials after a failure did: rescue the task, or give the same answer again."""
    if episode.verdicts and not episode.verdicts[0].passed:
        stats.failed_first += 1
        stats.rescued += int(any(v.passed for v in episode.verdicts[1:]))
    for before, after in itertools.pairwise(episode.attempts):
        stats.later_trials += 1
        stats.repeated_answers += int(same_answer(before.answer, after.answer))


def _lesson_events_by_episode(log: EpisodeLog) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for event in log.lesson_events():
        found.setdefault(event["episode_id"], []).append(event["event"])
    return found
