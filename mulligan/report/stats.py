"""Numbers for the report, computed from the episode log alone."""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mulligan.errors import UserError
from mulligan.memory.log import EpisodeLog
from mulligan.runs.lifecycle import configured
from mulligan.schema import Episode, Role, Selection, Usage, Verdict, add_by_role
from mulligan.strategies.stopping import HONEST, STOP_RULES, StopRule, stop_rule
from mulligan.studies.study import label_of, repeat_key


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
    """Tasks whose submitted answer passed with a budget of t trials (index t - 1): the
    episode stopped honestly, at its first attempt whose visible checks all passed, or at
    trial t; the hidden checks scored that answer. The honest score."""
    any_by_trial: list[int] = field(default_factory=list)
    """Cumulative: tasks with some attempt at or before trial t that passed: what an oracle
    picking among the attempts made would score."""
    tokens_by_trial: list[int] = field(default_factory=list)
    """Tokens the episodes would have spent with a budget of t trials (index t - 1)."""
    attempts: int = 0
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    """Dollars, every role; None when some call's price is unknown."""
    by_role: dict[Role, Usage] = field(default_factory=dict)
    """The same usage split by role (actor, summariser, reflector, judge)."""
    by_model: dict[str, Usage] = field(default_factory=dict)
    """The attempts' own calls (actor, summariser) by the model that made them (`escalate`
    hands later attempts to a stronger one)."""
    unmetered_calls: int = 0
    """Calls that timed out after they were sent: their tokens are in no count here."""
    hidden_unrun: int = 0
    """Attempts with a hidden check that could not start (scored as failed)."""
    seconds: float = 0.0
    lessons: Counter[str] = field(default_factory=Counter)
    solved_at: dict[str, int | None] = field(default_factory=dict)
    """The trial of the submitted answer (whole budget) if it passed, else None."""
    submitted: dict[str, list[bool]] = field(default_factory=dict)
    """Per task, whether the submitted answer passed with a budget of 1, 2, … trials."""
    any_passed: dict[str, list[bool]] = field(default_factory=dict)
    """Per task, whether some attempt at or before trial t passed."""
    spent: dict[str, list[int]] = field(default_factory=dict)
    """Per task, the tokens spent with a budget of 1, 2, … trials."""
    failed_first: int = 0
    """Tasks whose trial 1 failed."""
    rescued: int = 0
    """Of those, tasks a later trial solved."""
    later_trials: int = 0
    """Trials after the first."""
    repeated_answers: int = 0
    """Later trials whose answer was the previous trial's answer again, whitespace aside."""
    shown_first: set[str] = field(default_factory=set)
    """Tasks whose trial 1 was shown something from the store (lessons or cases)."""
    self_tested: SelfTestCounts = field(default_factory=lambda: SelfTestCounts())
    """How often the model's own tests agreed with the hidden ones (`--self-tests`)."""
    selections: list[Selection] = field(default_factory=list)
    """A selection strategy's record of each episode: how it chose."""
    units: dict[str, tuple[str, int]] = field(default_factory=dict)
    """What the per-task dicts above are keyed by (`unit_of`): each task of each repeat of
    the study, as (task, repeat); a study run once has one a task, keyed by the task."""

    @property
    def label(self) -> str:
        return label_of(self.strategy, self.run_pass)

    @property
    def solved(self) -> int:
        return self.solved_by_trial[-1] if self.solved_by_trial else 0

    def per_task(self, value: float) -> float:
        return value / self.tasks if self.tasks else 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def tokens_per_success(self) -> float | None:
        return self.tokens / self.solved if self.solved else None

    @property
    def cost_per_success(self) -> float | None:
        """None with no success or an unknown price."""
        return self.cost / self.solved if self.solved and self.cost is not None else None

    def total(self, trials: int) -> None:
        """The by-trial sums of the per-task figures, for budgets of 1…`trials` trials."""
        budgets = range(trials)
        self.solved_by_trial = [sum(s[t] for s in self.submitted.values()) for t in budgets]
        self.any_by_trial = [sum(s[t] for s in self.any_passed.values()) for t in budgets]
        self.tokens_by_trial = [sum(s[t] for s in self.spent.values()) for t in budgets]

    def add(self, usage: Usage, by_role: dict[Role, Usage]) -> None:
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.unmetered_calls += usage.unmetered_calls
        self.cost = (Usage(cost=self.cost) + usage).cost
        self.by_role = add_by_role(self.by_role, by_role)


@dataclass
class SelfTestCounts:
    """Over attempts that had self-tests and hidden checks."""

    attempts: int = 0
    self_passed: int = 0
    """Attempts whose self-tests all passed."""
    false_passes: int = 0
    """Of those, attempts the hidden checks failed."""
    hidden_passed: int = 0
    """Attempts the hidden checks passed."""
    false_alarms: int = 0
    """Of those, attempts some self-test failed."""

    def count(self, verdict: Verdict) -> None:
        own = [c.passed for c in verdict.checks if c.self_test]
        hidden = [c.passed for c in verdict.checks if c.visibility == "hidden"]
        if not own or not hidden:
            return
        self.attempts += 1
        if all(own):
            self.self_passed += 1
            self.false_passes += not all(hidden)
        if all(hidden):
            self.hidden_passed += 1
            self.false_alarms += not all(own)


@dataclass
class RunStats:
    run_id: str
    manifest: dict[str, Any]
    started_at: float
    ended_at: float | None
    status: str
    strategies: list[StrategyStats]
    task_ids: list[str]
    self_tests: list[dict[str, Any]] = field(default_factory=list)
    """Per task (and repeat), the self-tests written and kept, and those dropped by reason."""

    @property
    def repeats(self) -> int:
        """How many times the study ran over (`bench --repeats`; 1: once)."""
        return int(self.manifest.get("repeats") or 1)

    @property
    def seed(self) -> int:
        """The run's seed, which also seeds the report's bootstrap."""
        return int(self.manifest.get("seed") or 0)

    @property
    def trials(self) -> int:
        """The most trials any strategy's budgets go up to."""
        return max((len(s.solved_by_trial) for s in self.strategies), default=1)


SUFFIX = re.compile(r"(?::pass(\d+))?(?::repeat(\d+))?$")
"""The end of an episode id of a later pass or repeat (runner.episode_id)."""


def pass_and_repeat(episode_id: str, task_id: str | None = None) -> tuple[int, int]:
    """Which pass over the suite (`bench --passes`) and which repeat of the study (`bench
    --repeats`) an episode belongs to, from what follows its task's id in its id
    (`run:strategy:task`, then the suffix): a task id may itself end like a later pass or
    repeat."""
    rest = episode_id.split(":", 2)[-1]
    if task_id is not None and rest.startswith(task_id):
        found = SUFFIX.fullmatch(rest[len(task_id) :])
    else:
        found = SUFFIX.search(episode_id)
    run_pass, repeat = found.groups() if found else (None, None)
    return int(run_pass or 1), int(repeat or 1)


def unit_of(task_id: str, repeat: int) -> str:
    """A task of one repeat, as the report's per-task figures key it: the task's id in the
    first repeat (a study run once is keyed by its tasks), marked in a later one."""
    return task_id if repeat == 1 else f"{task_id} (repeat {repeat})"


COUNTED_EVENTS = {
    "retrieved": "retrieved",
    "status:validated": "validated",
    "status:refuted": "refuted",
}
"""The lesson events the report counts, under the names of its lessons table."""


def collect(log: EpisodeLog, run_id: str) -> RunStats:
    run = log.run(run_id)
    if run is None:
        raise UserError(
            f"no run {run_id!r} in {log.path}; `mulligan report` lists nothing to rebuild"
        )
    manifest = json.loads(run["manifest"])
    trials = int(configured(manifest, "loop", "trials", 1))
    honest = stop_rule("honest", logged_stop_rule(manifest).own_checks_first)
    rows = log.episodes(run_id)
    given = manifest.get("task_order") or manifest.get("tasks")  # bench's, or run's selection
    groups = {
        (strategy, run_pass): StrategyStats(strategy, run_pass)
        for strategy in manifest.get("strategies", [])
        for run_pass in range(1, int(manifest.get("passes", 1)) + 1)
    }
    events = Counter((e["episode_id"], COUNTED_EVENTS.get(e["event"])) for e in log.lesson_events())
    repeats = range(1, int(manifest.get("repeats") or 1) + 1)
    kept = {r: log.run_self_tests(repeat_key(run_id, r)) for r in repeats}
    written = {
        (t["task_id"], r): Usage.model_validate(t["usage"]) for r in repeats for t in kept[r]
    }
    for row in sorted(rows, key=lambda r: (r["position"], r["id"])):
        run_pass, repeat = pass_and_repeat(row["id"], row["task_id"])
        key = (row["strategy"], run_pass)
        stats = groups.setdefault(key, StrategyStats(*key))
        episode = log.episode(row["id"])
        if episode is None or not row["ended_at"]:
            continue  # unfinished: not counted until resumed
        stats.tasks += 1
        unit = unit_of(episode.task_id, repeat)
        stats.units[unit] = (episode.task_id, repeat)
        budget = by_budget(episode, trials, honest)
        stats.submitted[unit] = [b.passed for b in budget]
        stats.any_passed[unit] = [b.any_passed for b in budget]
        stats.spent[unit] = [b.tokens for b in budget]
        stats.solved_at[unit] = budget[-1].trial if budget[-1].passed else None
        if episode.attempts and episode.attempts[0].lesson_ids:  # trial 1: the store's only
            stats.shown_first.add(unit)
        for verdict in episode.verdicts:
            stats.self_tested.count(verdict)
            stats.hidden_unrun += int(bool(verdict.hidden_unrun))
        if (episode.task_id, repeat) in written:  # every strategy pays for its tests once
            tested = written[(episode.task_id, repeat)]
            stats.add(tested, {"tester": tested})
        for attempt in episode.attempts:
            stats.attempts += 1
            stats.steps += len(attempt.steps)
            stats.add(attempt.usage, attempt.usage_by_role)
            own = [attempt.usage_by_role.get(r, Usage()) for r in ("actor", "summariser")]
            stats.by_model[attempt.model] = sum(own, stats.by_model.get(attempt.model, Usage()))
            stats.seconds += attempt.seconds
        count_later_trials(stats, episode)
        stats.selections += [episode.selection] if episode.selection else []
        stats.lessons["written"] += len(episode.lessons_written)
        for counted in COUNTED_EVENTS.values():
            stats.lessons[counted] += events[(episode.id, counted)]
    for stats in groups.values():  # react stays flat after trial 1: it has no later trials
        stats.total(max(trials, 1))
    return RunStats(
        run_id=run_id,
        manifest=manifest,
        started_at=run["started_at"],
        ended_at=run["ended_at"],
        status=run["status"],
        strategies=list(groups.values()),
        task_ids=list(given or sorted({r["task_id"] for r in rows})),
        self_tests=[t for r in repeats for t in kept[r]],
    )


def logged_stop_rule(manifest: dict[str, Any]) -> StopRule:
    """The rule a run stopped by, as its manifest says (runs logged before the rule was
    recorded: oracle)."""
    stop = str(configured(manifest, "loop", "stop", "oracle"))
    own_first = bool(configured(manifest, "loop", "own_checks_first", True))
    return stop_rule(stop if stop in STOP_RULES else "oracle", own_first)


@dataclass(frozen=True)
class AtBudget:
    """An episode as it would have ended with a budget of `budget` trials."""

    budget: int
    trial: int
    """The attempt it submits."""
    passed: bool
    """Its hidden verdict: the score."""
    any_passed: bool
    """Some attempt it made passed (an oracle's pick)."""
    tokens: int


def by_budget(episode: Episode, trials: int, honest: StopRule = HONEST) -> list[AtBudget]:
    """For budgets 1…trials: the attempt an honest stop submits (the first whose visible
    checks all pass, read as the run's `honest` rule reads them, else the budget's last) and
    the tokens spent up to it. Whatever rule the run stopped by, the attempts up to that one
    are the same, so this reads honest scores out of an oracle run too. A reflection after the
    submitted attempt was only made because the run went on: it is not counted in that
    budget's tokens."""
    found: list[AtBudget] = []
    verdicts = episode.verdicts
    for budget in range(1, max(trials, 1) + 1):
        if not verdicts:
            found.append(AtBudget(budget, 0, False, False, 0))
            continue
        made = min(budget, len(verdicts))
        end = next((i for i in range(made) if honest.ends(verdicts[i])), made - 1)
        tokens = sum(a.usage.total_tokens for a in episode.attempts[: end + 1])
        if end + 1 < len(episode.attempts):
            tokens -= episode.attempts[end].usage_by_role.get("reflector", Usage()).total_tokens
        anyone = any(v.passed for v in verdicts[:made])
        if episode.selection is not None:  # every candidate drawn, then one submitted
            end, tokens = _selected(episode, made)
        found.append(AtBudget(budget, end + 1, verdicts[end].passed, anyone, tokens))
    return found


def _selected(episode: Episode, made: int) -> tuple[int, int]:
    """(the index a selection submits among the first `made` candidates, their tokens)."""
    picks = episode.selection.picks if episode.selection else []
    trial = picks[min(made, len(picks)) - 1] if picks else episode.attempts[made - 1].trial
    trials = [a.trial for a in episode.attempts]
    end = trials.index(trial) if trial in trials else made - 1
    return end, sum(a.usage.total_tokens for a in episode.attempts[:made])


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
