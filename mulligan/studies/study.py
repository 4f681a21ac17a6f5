"""Strategies side by side: same tasks, model, temperature, budgets and tools."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from mulligan import strategies as registry
from mulligan.actor import Tool
from mulligan.errors import UserError
from mulligan.evaluator.self_tests import SelfTestWriter
from mulligan.llm.base import ChatModel
from mulligan.loop import Drawn, Loop
from mulligan.memory import Memory
from mulligan.runs.build import loop_for
from mulligan.runs.lifecycle import configured, manifest
from mulligan.runs.runner import episode_id, later_suffix, run_tasks, self_tests_for
from mulligan.sandbox import Policy
from mulligan.schema import Episode, Task
from mulligan.settings.run_config import RunConfig

if TYPE_CHECKING:
    from mulligan.runs.executors import Executor

ModelFor = Callable[[str], ChatModel]
"""The chat model for a strategy: the same endpoint and settings for every strategy."""
OnEpisode = Callable[[str, Task, Episode], None]
"""Told of each finished episode: its group's label (`label_of`), the task, the episode."""


def label_of(strategy: str, run_pass: int = 1, repeat: int = 1) -> str:
    """A strategy's episodes of one pass over the memory or one repeat of the study, named."""
    if run_pass > 1:
        return f"{strategy} (pass {run_pass})"
    return f"{strategy} (repeat {repeat})" if repeat > 1 else strategy


def repeat_key(run_id: str, repeat: int) -> str:
    """What a later repeat's self-tests are kept under in the log (repeat 1's: the run's id)."""
    return run_id if repeat == 1 else f"{run_id}:repeat{repeat}"


def check_repeats(strategies: list[str], repeats: int, passes: int) -> None:
    """Repeats of a study are independent draws of the same study: refused where one repeat
    would start from what an earlier one left (a strategy that writes the lesson store, or
    verifies its lessons: their evidence decides which are shown), and beside `--passes`,
    which runs the suite again over the memory on purpose."""
    if repeats <= 1:
        return
    if passes > 1:
        raise UserError(
            "--repeats with --passes: --passes runs the suite again over what the memory kept, "
            "--repeats runs the study again from the start; choose one"
        )
    learners = [name for name in strategies if registry.get(name).writes_store]
    if learners:
        raise UserError(
            f"--repeats: {', '.join(learners)} writes lessons into the store, so a later repeat "
            "would start from an earlier one's lessons and the repeats would not be "
            "independent; leave it out of a repeated study (--passes measures what it kept)"
        )
    verifiers = [name for name in strategies if registry.get(name).verifies]
    if verifiers:
        raise UserError(
            f"--repeats: {', '.join(verifiers)} verifies the store's lessons as it works, so a "
            "later repeat would be shown the lessons an earlier one validated and the repeats "
            "would not be independent; leave it out of a repeated study"
        )


def check_episode_ids(tasks: list[Task], passes: int, repeats: int) -> None:
    """Refuses two tasks that a later pass or repeat would log as one episode: task `x` there
    is `x:repeat2`, the id another task may have in the first."""
    ids = {task.id for task in tasks}
    later = [(p, r) for p in range(1, passes + 1) for r in range(1, repeats + 1)][1:]
    for task in tasks:
        for run_pass, repeat in later:
            twin = task.id + later_suffix(run_pass, repeat)
            if twin in ids:
                raise UserError(
                    f"tasks {task.id!r} and {twin!r}: the first's episode in a later pass or "
                    f"repeat would have the second's id; rename {twin!r}"
                )


def first_attempt_source(strategies: list[str], design: str) -> str | None:
    """In a paired study, the strategy whose trial 1 the others that share it continue from."""
    if design != "paired":
        return None
    return next((s for s in strategies if registry.get(s).shares_first_attempt), None)


def ordered(tasks: list[Task], seed: int) -> list[Task]:
    shuffled = list(tasks)
    random.Random(seed).shuffle(shuffled)
    return shuffled


def study_fields(
    strategies: list[str],
    tasks: list[Task],
    seed: int,
    passes: int,
    design: str,
    first_from: str | None,
    repeats: int = 1,
) -> dict[str, Any]:
    """What a study adds to its run's manifest: its strategies, seeded task order, passes,
    repeats and design (a resume must match them)."""
    return {
        "strategies": strategies,
        "seed": seed,
        "passes": passes,
        "repeats": repeats,
        "task_order": [t.id for t in ordered(tasks, seed)],
        "design": design,
        "first_attempt_from": first_attempt_source(strategies, design),
        "first_attempt_run": first_from,
    }


@dataclass
class Study:
    tasks: list[Task]
    strategies: list[str]
    model_for: ModelFor
    memory: Memory
    config: RunConfig = field(default_factory=RunConfig)
    """Budget, compression, trials, stopping, carry-over, similarity floor, self-tests,
    concurrency: the same for every strategy."""
    extra_tools: list[Tool] = field(default_factory=list)
    policy: Policy = field(default_factory=Policy)
    """What the box hides (the suite's answers, the settings files; the memory is added)."""
    seed: int = 0
    passes: int = 1
    repeats: int = 1
    """The whole study this many times over, each repeat drawing its own attempts (trial 1
    and the self-tests too) in the same task order; one run, each episode of a later repeat
    under its own id."""
    design: str = "paired"
    """`paired`: trial 1 made once per task and shared by every strategy that starts without
    lessons; `independent`: each strategy makes its own."""
    info: dict[str, Any] = field(default_factory=dict)
    """The command's manifest fields: its suite selection, a local model's facts, labels."""
    executor: Executor | None = None
    """Where episodes run (None: threads in this process)."""
    reflector: ChatModel | None = None
    """A feedback model of its own for the reflector, the self-tests and a selection's inputs
    (`--reflector-model`; None: each strategy's own model)."""
    escalation: ChatModel | None = None
    """The stronger model a strategy that escalates hands its later trials to."""
    first_from: str | None = None
    """Another run in the same log whose trial 1s this study's strategies that start without
    lessons continue from (that run's own shared trial 1), so that two studies (honest and
    oracle stopping, say) are paired on the very same first attempts and pay for them once."""

    def manifest(self) -> dict[str, Any]:
        """What the run is: a resume must match it."""
        own = study_fields(
            self.strategies, self.tasks, self.seed, self.passes, self.design, self.first_from,
            self.repeats,
        )  # fmt: skip
        return manifest(self.config, **{**self.info, "command": "bench", **own})

    def run(self, run_id: str, on_episode: OnEpisode | None = None) -> None:
        """Every repeat, every pass, every strategy, every task; finished episodes are not
        redone."""
        check_repeats(self.strategies, self.repeats, self.passes)
        check_episode_ids(self.tasks, self.passes, self.repeats)
        for repeat in range(1, self.repeats + 1):
            for run_pass in range(1, self.passes + 1):
                for strategy in self.strategies:  # a memory arm shown nothing shares it too
                    self._run_strategy(run_id, strategy, run_pass, repeat, on_episode)

    def _run_strategy(
        self, run_id: str, strategy: str, run_pass: int, repeat: int, on_episode: OnEpisode | None
    ) -> None:
        source = first_attempt_source(self.strategies, self.design)
        first_run, first_source = run_id, source
        if self.first_from:
            first_run, first_source = self.first_from, self._source_of(self.first_from)
        shared = source and (strategy != source or self.first_from is not None)
        label = label_of(strategy, run_pass, repeat)
        run_tasks(
            lambda: self._loop(strategy, run_id),
            ordered(self.tasks, self.seed),  # one order for all: what is learned early matters
            run_id=run_id,
            strategy=strategy,
            memory=self.memory,
            # memory strategies learn in task order: keep it fixed
            concurrency=1 if registry.get(strategy).writes_store else self.config.run.concurrency,
            run_pass=run_pass,
            repeat=repeat,
            on_episode=partial(on_episode, label) if on_episode else None,
            drawn=self._first_attempts(first_run, first_source, run_pass, repeat)
            if shared
            else None,
            executor=self.executor,
            prepare=self._self_tests(first_run, repeat),
        )

    def _self_tests(self, first_run: str, repeat: int) -> Callable[[Task], Task] | None:
        """Each task's self-tests (`--self-tests`): written once per task and repeat, kept in
        the log, and checked by every strategy of that repeat."""
        if not self.config.loop.self_tests:
            return None
        hidden = self.policy.hiding(self.memory.directory)
        writer = SelfTestWriter(self.reflector or self.model_for(self.strategies[0]), hidden)
        kept_as = repeat_key(first_run, repeat)
        return self_tests_for(self.memory.log, kept_as, writer, self.config.loop.self_tests)

    def _source_of(self, other: str) -> str | None:
        """The strategy whose trial 1s the other run shared; refused unless it ran the same
        tasks in the same order, with the same self-tests."""
        run = self.memory.log.run(other)
        if run is None:
            raise UserError(f"--first-from {other}: no run with this id in {self.memory.log.path}")
        theirs = json.loads(run["manifest"] or "{}")
        mine = self.manifest()
        same = (
            ("task_order", "--sample/--seed/--ids", theirs.get("task_order"), mine["task_order"]),
            (
                "self_tests",
                "--self-tests",
                configured(theirs, "loop", "self_tests", 0),
                self.config.loop.self_tests,
            ),
        )
        for what, flag, their_value, my_value in same:
            if their_value != my_value:
                raise UserError(
                    f"--first-from {other}: that run's {what} differs from this one's; "
                    f"use its own {flag}"
                )
        if int(theirs.get("repeats", 1)) < self.repeats:
            raise UserError(
                f"--first-from {other}: that run made trial 1s for {theirs.get('repeats', 1)} "
                f"repeat(s), this one asks for {self.repeats}; use at most its --repeats"
            )
        return theirs.get("first_attempt_from")

    def _first_attempts(
        self, run_id: str, source: str | None, run_pass: int, repeat: int
    ) -> Callable[[Task], Drawn]:
        """A task's trial 1 as the source strategy made it in the same pass and repeat (read
        back from the log)."""

        def first(task: Task) -> Drawn:
            made = self.memory.log.episode(
                episode_id(run_id, str(source), task.id, run_pass, repeat)
            )
            if made is None or not made.attempts or made.attempts[0].trial != 1:
                return {}
            return {1: (made.attempts[0], made.verdicts[0])}

        return first

    def _loop(self, strategy: str, run_id: str, trials: int | None = None) -> Loop:
        """`trials`: fewer than the settings say (verification makes one attempt a task)."""
        fewer: dict[str, Any] = {"trials": trials} if trials else {}
        return loop_for(
            self.config, self.model_for(strategy), strategy, self.memory, run_id,
            policy=self.policy, reflector=self.reflector, extra_tools=self.extra_tools,
            escalation=self.escalation, **fewer,
        )  # fmt: skip
