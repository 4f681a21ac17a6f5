"""Which way `solve` goes: the repair pipeline for "make the failing tests pass" (the failing
check names failing tests, or its traceback goes into the project's code), the agent loop for
the rest; `--strategy` overrides the choice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mulligan import strategies
from mulligan.errors import UserError
from mulligan.loop import Loop
from mulligan.schema import Task
from mulligan.solve.context import Diagnosis, diagnose
from mulligan.solve.copies import Project
from mulligan.solve.preflight import CheckRun
from mulligan.solve.repair import Outcome, RepairPipeline


@dataclass
class Choice:
    strategy: strategies.Strategy
    reason: str
    diagnosis: Diagnosis | None = None
    """What the repair pipeline starts from (None for the agent loop)."""

    @property
    def line(self) -> str:
        """The line `solve` says it with, among its first."""
        kind = "the repair pipeline" if self.strategy.outside_loop else "the agent loop"
        said = f"strategy: {self.strategy.name} ({kind}; {self.reason})"
        return said + (f"; {self.diagnosis.line()}" if self.diagnosis else "")


def _shape(diagnosis: Diagnosis | None) -> str | None:
    """Why the failure suits the repair pipeline; None when it does not."""
    if diagnosis is None or not diagnosis.localisation.functions:
        return None
    if diagnosis.failure.project_frames:
        return "the failing check's traceback goes into the project's code"
    if diagnosis.failure.tests or diagnosis.failure.test_frames:
        return "the failing check names the tests that fail"
    return None


def choose(name: str, before: list[CheckRun], project: Project, trials: int = 1) -> Choice:
    """The strategy `--strategy NAME` asks for, or for `auto` the one the failure suits
    (`trials`: the candidates the repair pipeline would make, for what it says it shows)."""
    given = strategies.for_solve(name)
    diagnosis = diagnose(before, project, trials)
    fits = _shape(diagnosis)
    if given is None:
        if fits:
            return Choice(strategies.PATCH, f"chosen: {fits}", diagnosis)
        return Choice(
            strategies.agent_default(),
            "chosen: the failing check names no test and no line of the project's code",
        )
    if not given.outside_loop:
        return Choice(given, "as --strategy asks")
    if diagnosis is None or not diagnosis.localisation.functions:
        raise UserError(
            f"--strategy {name}: the failing check names no test and no function of the "
            f"project to start from; use --strategy {strategies.agent_default().name} (the "
            "agent loop) or --strategy auto"
        )
    return Choice(given, "as --strategy asks", diagnosis)


def run_choice(
    choice: Choice,
    task: Task,
    request: str,
    episode_id: str,
    loop: Callable[[], Loop],
    pipeline: Callable[[], RepairPipeline],
) -> Outcome:
    """Run what was chosen: the repair pipeline from its diagnosis, or the agent loop (whose
    passing attempt is its last). `request`: the user's task in their words."""
    if choice.strategy.outside_loop and choice.diagnosis is not None:
        return pipeline().run(task, choice.diagnosis, request, episode_id)
    episode = loop().run_episode(task, episode_id)
    return Outcome(episode, episode.attempts[-1] if episode.passed else None)
