"""Strategies side by side: same tasks, model, temperature, budgets and tools."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mulligan.actor import ActorSettings
from mulligan.actor.tools import Tool
from mulligan.bench.executors import Executor
from mulligan.bench.runner import check_resume, make_loop, manifest, run_tasks
from mulligan.llm.base import ChatModel
from mulligan.loop import Loop, LoopSettings
from mulligan.memory import Memory
from mulligan.schema import Episode, Task

ModelFor = Callable[[str], ChatModel]
"""The chat model for a strategy: the same endpoint and settings for every strategy."""


@dataclass
class Study:
    tasks: list[Task]
    strategies: list[str]
    model_for: ModelFor
    memory: Memory
    actor_settings: ActorSettings = field(default_factory=ActorSettings)
    trials: int = 3
    seed: int = 0
    passes: int = 1
    concurrency: int = 1
    extra_tools: list[Tool] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    """Extra manifest fields: suite, endpoint, temperature, labels."""
    executor: Executor | None = None
    """Where episodes run (None: threads in this process)."""

    def ordered_tasks(self) -> list[Task]:
        """One seeded order for every strategy (what reflexion-memory learns early matters)."""
        ordered = list(self.tasks)
        random.Random(self.seed).shuffle(ordered)
        return ordered

    def manifest(self) -> dict[str, Any]:
        """What the run is: a resume must match it."""
        return manifest(
            command="bench",
            model=self.model_for(self.strategies[0]).name,
            strategies=self.strategies,
            trials=self.trials,
            seed=self.seed,
            passes=self.passes,
            concurrency=self.concurrency,
            budget=vars(self.actor_settings.budget),
            protocol=self.actor_settings.protocol,
            compression=vars(self.actor_settings.compression),
            task_order=[t.id for t in self.ordered_tasks()],
            **self.info,
        )

    def start(self, run_id: str) -> None:
        self.memory.log.start_run(run_id, self.manifest())

    def check_resume(self, run_id: str) -> None:
        log = self.memory.log
        check_resume(log.run(run_id), run_id, self.manifest(), log.path)

    def run(
        self, run_id: str, on_episode: Callable[[str, int, Task, Episode], None] | None = None
    ) -> None:
        """Every pass, every strategy, every task; finished episodes are not redone."""
        tasks = self.ordered_tasks()
        for run_pass in range(1, self.passes + 1):
            for strategy in self.strategies:

                def report(
                    task: Task, episode: Episode, strategy: str = strategy, run_pass: int = run_pass
                ) -> None:
                    if on_episode:
                        on_episode(strategy, run_pass, task, episode)

                run_tasks(
                    lambda strategy=strategy: self._loop(strategy, run_id),  # type: ignore[misc]
                    tasks,
                    run_id=run_id,
                    strategy=strategy,
                    memory=self.memory,
                    # memory strategies learn in task order: keep it fixed
                    concurrency=1 if strategy == "reflexion-memory" else self.concurrency,
                    run_pass=run_pass,
                    on_episode=report,
                    executor=self.executor,
                )
        self.memory.log.end_run(run_id)

    def _loop(self, strategy: str, run_id: str) -> Loop:
        return make_loop(
            self.model_for(strategy),
            self.actor_settings,
            LoopSettings(strategy=strategy, trials=self.trials, extra_tools=self.extra_tools),
            self.memory,
            run_id,
        )
