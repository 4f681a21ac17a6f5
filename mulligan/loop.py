"""The outer loop: attempts, verdicts, reflections and memory, wired together.

The loop asks its strategy (mulligan/strategies/) what to carry over and whether to
reflect, and its stop rule whether the episode is over; it compares no names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, model_validator

from mulligan import sandbox, strategies
from mulligan.actor import Actor, Tool, build_tools
from mulligan.errors import UserError, field_problems
from mulligan.evaluator import Evaluator
from mulligan.evaluator.selector import Selector
from mulligan.memory import Memory
from mulligan.memory.memory import episode_for
from mulligan.memory.written import Written
from mulligan.reflector import Reflector
from mulligan.schema import Attempt, Episode, Lesson, Task, Verdict, tells_nothing
from mulligan.settings.run_config import LoopSection, MemorySection
from mulligan.strategies.carry import unseen
from mulligan.strategies.cases import case_of

log = logging.getLogger("mulligan")
WORKSPACE_TOOLS = {"python", "shell", "read_file", "write_file", "list_files"}
Drawn = dict[int, tuple[Attempt, Verdict]]
"""Attempts already made of a task from its bare prompt, by trial (a paired study's): an
attempt the loop would make from the bare prompt at such a trial, at its strategy's plain
draw, reuses that one instead."""


class LoopSettings(LoopSection, MemorySection):
    """The run configuration's [loop] and [memory] sections, with the strategy and what a
    command adds: extra tools, and where each attempt works (default: a scratch directory
    laid out from the task)."""

    model_config = ConfigDict(extra="forbid", frozen=False, arbitrary_types_allowed=True)

    strategy: str = "reflexion"
    retrieved_lessons: int = Field(default=3, ge=0)
    concurrency: int = Field(default=1, ge=1)
    """A selection strategy's candidates drawn at once (the run's concurrency)."""
    extra_tools: list[Tool] = Field(default_factory=list)
    workspace_for: Callable[[Task], AbstractContextManager[Path | None]] | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _bad_values_are_user_errors(cls, data: Any, handler: Any) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            raise UserError(field_problems(exc, "loop settings")[0]) from exc

    @model_validator(mode="after")
    def _known_names(self) -> LoopSettings:
        strategies.for_loop(self.strategy).check_trials(self)  # a known name, with room to work
        strategies.stop_rule(self.stop)
        return self


@dataclass
class Loop:
    actor: Actor
    evaluator: Evaluator
    settings: LoopSettings
    reflector: Reflector | None = None
    memory: Memory | None = None
    run_id: str = ""
    selector: Selector | None = None
    """Submits one of a selection strategy's candidates (default: the actor's model writes
    its inputs)."""
    policy: sandbox.Policy = field(default_factory=sandbox.Policy)
    """What the box hides from the code attempts and checks run (the suite's answers, the
    config files); the memory's directory is added."""
    shown: Callable[[Task], list[Lesson]] | None = None
    """What the store's place in the prompt shows instead of retrieval (verification's pairs)."""
    escalation: Actor | None = None
    """The stronger model's actor, for the trials its strategy draws escalated."""

    def __post_init__(self) -> None:
        self.strategy = strategies.for_loop(self.settings.strategy)
        self.stop = strategies.stop_rule(self.settings.stop, self.settings.own_checks_first)
        if self.memory:  # past verdicts and hidden details are no business of the box
            self.policy = self.policy.hiding(self.memory.directory)

    def run_episode(
        self,
        task: Task,
        episode_id: str | None = None,
        position: int = 0,
        drawn: Drawn | None = None,
    ) -> Episode:
        """One task under the strategy; an episode id already in the log is resumed.

        `drawn`: attempts already made from the bare prompt (a paired study shares them); a
        trial its strategy draws otherwise (another temperature) is made afresh."""
        strategy, trials = self.strategy, self.strategy.trials(self.settings.trials)
        drawn = drawn or {}
        episode = episode_for(
            self.memory, episode_id, self.run_id, task.id, self.settings.strategy, position
        )
        pending = self.memory is not None and self.memory.reflection_to_redo(episode)
        reflections = list(episode_reflections(episode, self.memory))
        if self.memory and pending:  # a crash cut it short
            given = self.memory.lessons(episode.attempts[-1].lesson_ids)
            reflections += self._after(task, episode, given, len(episode.attempts) >= trials)
        if strategy.draws_candidates:  # all at once, then one is submitted by selection
            return self._draw_and_select(task, episode, trials, drawn)
        for trial in range(len(episode.attempts) + 1, trials + 1):
            if episode.verdicts and self.stop.ends(episode.verdicts[-1]):
                break  # the answer is submitted
            retrieve, kept = self._retriever(task, episode), self.settings.carried_reflections
            lessons = strategy.lessons_for(reflections, kept, retrieve, trial)
            attempt, verdict = self._attempt(task, episode, trial, lessons, drawn)
            episode.attempts.append(attempt)
            episode.verdicts.append(verdict)
            episode.passed = verdict.passed  # the hidden verdict of the answer it ends with
            if self.memory:
                self.memory.finish_attempt(episode, attempt, verdict, lessons)
            reflections += self._after(task, episode, lessons, last=trial == trials)
        if self.memory:
            self.memory.finish_episode(episode)
        return episode

    def _attempt(
        self,
        task: Task,
        episode: Episode,
        trial: int,
        lessons: list[Lesson],
        drawn: Drawn,
    ) -> tuple[Attempt, Verdict]:
        """Trial `trial` made and judged, or the one already `drawn` at that trial when it
        would be made from the bare prompt; steps are logged as they come, and those logged
        before a crash resumed."""
        texts, carried = self.strategy.carry_over(task, episode, lessons, self.settings.carry)
        draw = self.strategy.draw(trial, self.settings)
        if trial in drawn and draw.plain and not lessons and not carried:  # the bare prompt
            return drawn[trial][0].shared(), drawn[trial][1].model_copy(deep=True)
        actor = self.escalation if draw.escalated and self.escalation else self.actor
        memory = self.memory
        with self._workspace(task) as workspace:
            tools = build_tools(
                task.tools, workspace=workspace, scratch_workspace=True, documents=task.documents,
                extra=self.settings.extra_tools, network=task.network, policy=self.policy,
            )  # fmt: skip
            attempt = actor.run(
                task.id, task.prompt, tools, lessons=texts, carried=carried,
                lesson_ids=[lesson.id for lesson in lessons], trial=trial,
                budget=self.actor.settings.budget_for(task.budget),
                on_step=partial(memory.log.log_step, episode.id, trial) if memory else None,
                resume=memory.log.unfinished_steps(episode.id, trial) if memory else None,
                temperature=draw.temperature, approach=draw.approach,
            )  # fmt: skip
            return attempt, self.evaluator.evaluate(task, attempt, workspace, self.policy)

    def _draw_and_select(self, task: Task, episode: Episode, trials: int, drawn: Drawn) -> Episode:
        """Independent candidates (some may be shared ones), drawn in waves at once until
        one passes every visible check or no further one could change the pick (all N with
        `draw_all`), then the selector's pick: the episode's score is that candidate's hidden
        verdict."""

        if episode.attempts and episode.attempts[-1].selection is not None:
            return self._submit(episode)  # picked, and logged with its charges, before a crash

        def draw(trial: int) -> tuple[Attempt, Verdict]:
            lessons = self.strategy.lessons_for([], 0, self._retriever(task, episode, trial), trial)
            return self._attempt(task, episode, trial, lessons, drawn)

        selector = self.selector or Selector(self.actor.model, self.settings)
        probes, made = selector.probes(task), zip(episode.attempts, episode.verdicts, strict=True)
        found = [selector.evidence(a, v, probes, self.policy) for a, v in made]
        while (left := trials - len(episode.attempts)) > 0:
            wave = (
                left if self.settings.draw_all else selector.to_draw(found, episode.verdicts, left)
            )
            if not wave:
                break  # decided: the rest could not change the pick
            trials_now = range(len(episode.attempts) + 1, len(episode.attempts) + wave + 1)
            with ThreadPoolExecutor(max(1, min(self.settings.concurrency, wave))) as pool:
                for attempt, verdict in pool.map(draw, trials_now):
                    episode.attempts.append(attempt)
                    episode.verdicts.append(verdict)
                    found.append(selector.evidence(attempt, verdict, probes, self.policy))
                    if self.memory:
                        given = self.memory.lessons(attempt.lesson_ids)
                        self.memory.finish_attempt(episode, attempt, verdict, given)
        last = episode.attempts[-1]
        last.selection, spent = selector.select(
            task, episode.attempts, episode.verdicts, self.policy, probes, found
        )
        last.charge("selector", spent)
        if self.memory:  # the pick and what it cost: one transaction
            self.memory.log_charges(episode)
        return self._submit(episode)

    def _submit(self, episode: Episode) -> Episode:
        """The selection's pick submitted: the episode's score is its hidden verdict."""
        episode.passed = episode.verdicts[episode.submitted].passed
        if self.memory:
            self.memory.finish_episode(episode)
        return episode

    # ------------------------------------------------------------ what differs

    def _retriever(self, task: Task, episode: Episode, trial: int = 0) -> strategies.base.Retrieve:
        """General lessons (and cases) from the store for this task, none already in play, for
        `trial` (default: the next one)."""

        def retrieve(known: set[str]) -> list[Lesson]:
            if not self.memory or self.shown:
                return self.shown(task) if self.shown else []
            s = self.settings
            known = known | set(episode.lessons_written)
            lessons, cases = self.strategy.wants(s.retrieved_lessons, s.retrieved_cases)
            return self.memory.recall(
                task, episode.id, trial or len(episode.attempts) + 1, k=lessons, exclude=known,
                cases=cases, min_similarity=s.min_similarity, show_candidates=s.show_candidates,
                verify=self.strategy.verifies, shuffled=self.strategy.shuffles,
            )  # fmt: skip

        return retrieve

    def _after(self, task: Task, episode: Episode, given: list[Lesson], last: bool) -> list[Lesson]:
        """What is kept after an attempt, whole or not at all (memory/written.py): its
        reflection or insight (`_reflection`), and with the store the case it makes.
        Returns what this episode carries on: its diagnoses."""
        written = self._reflection(task, episode, given, last)
        case = self._case(task, episode)
        if written is None and case is None:
            return []
        written = written or Written()
        written.case = case
        if self.memory:
            kept = self.memory.keep_written(episode, written)
        else:
            kept = written.lessons
            for lesson in kept:
                for old in written.replaces.get(lesson.id, []):
                    old.validity.status, old.validity.superseded_by = "superseded", lesson.id
            episode.lessons_written += [lesson.id for lesson in kept]
        return [lesson for lesson in kept if lesson.kind == "diagnosis"]

    def _reflection(
        self, task: Task, episode: Episode, given: list[Lesson], last: bool
    ) -> Written | None:
        """After an attempt the stop rule did not accept (and not after the last trial), a
        diagnosis, and with the store also a general lesson; with the store, an insight after
        an accepted attempt that followed a rejected one; the attempt is charged for it. None
        after an attempt that tells nothing about the task (the endpoint failed, a check could
        not start), or when no reflection is due."""
        attempt, verdict = episode.attempts[-1], episode.verdicts[-1]
        if not (self.reflector and self.strategy.reflects) or tells_nothing(attempt, verdict):
            return None
        stored = self.strategy.writes_store
        accepted = self.stop.ends(verdict)
        if accepted and stored and len(episode.attempts) > 1:
            failed, failed_verdict = episode.attempts[-2], episode.verdicts[-2]
            if tells_nothing(failed, failed_verdict):
                return None  # the attempt before never met the task: nothing made a difference
            written = self.reflector.insight(task, failed, failed_verdict, attempt, episode.id)
            replaces: dict[str, list[Lesson]] = {}
        elif not accepted and not last:
            reflection = self.reflector.reflect(task, attempt, verdict, given, episode.id)
            general = reflection.lessons if stored else []
            written = ([reflection.diagnosis] if reflection.diagnosis else []) + general
            replaces = reflection.replaces
        else:
            return None
        attempt.charge("reflector", self.reflector.take_usage())
        written = unseen(written, episode_reflections(episode, self.memory) + given)
        return Written(lessons=written, to_store=stored, replaces=replaces)

    def _case(self, task: Task, episode: Episode) -> Lesson | None:
        """A strategy that writes the store keeps an attempt whose visible checks passed as a
        case (mulligan/strategies/cases.py)."""
        if self.memory and self.strategy.writes_store and not self.memory.frozen:
            return case_of(task, episode.attempts[-1], episode.verdicts[-1], episode.id)
        return None

    # ------------------------------------------------------------ plumbing

    def _workspace(self, task: Task) -> AbstractContextManager[Path | None]:
        if self.settings.workspace_for:
            return self.settings.workspace_for(task)
        needed = task.workspace is not None or bool(WORKSPACE_TOOLS & set(task.tools))
        needed = needed or any(check.in_workspace for check in task.checks)  # an empty one
        return sandbox.ScratchWorkspace(task.workspace if needed else None, enabled=needed)


def episode_reflections(episode: Episode, memory: Memory | None) -> list[Lesson]:
    """The lessons an episode wrote so far (after a resume, from the log)."""
    if not memory or not episode.lessons_written:
        return []
    return memory.lessons(episode.lessons_written)
