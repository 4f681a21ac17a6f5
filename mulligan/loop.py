"""The outer loop: attempts, verdicts, reflections and memory, wired together.

Strategies differ only in what they carry from one attempt to the next:
  react             one attempt
  retry             up to N attempts, nothing carried over
  reflexion         up to N attempts; the previous answer, its visible feedback and the
                    episode's diagnoses carried over (mulligan/carry.py)
  reflexion-memory  as reflexion, plus general lessons from and into the persistent store
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from mulligan import sandbox
from mulligan.actor import Actor, Tool, build_tools
from mulligan.carry import carry_over, unseen
from mulligan.defaults import MIN_SIMILARITY, Carry
from mulligan.errors import UserError
from mulligan.evaluator import Evaluator
from mulligan.memory import Memory
from mulligan.reflector import Reflector
from mulligan.schema import Attempt, Episode, Lesson, Step, Task, Verdict

log = logging.getLogger("mulligan")
WORKSPACE_TOOLS = {"python", "shell", "read_file", "write_file", "list_files"}


@dataclass
class LoopSettings:
    strategy: str = "reflexion"
    trials: int = 3
    carried_reflections: int = 3
    """Reflexion keeps the last few reflections of the episode (3 in the paper)."""
    retrieved_lessons: int = 3
    min_similarity: float = MIN_SIMILARITY
    carry: Carry = "full"
    """Reflexion's carry-over: `full` (previous answer, visible feedback, reflections) or
    `lessons` (the reflections only)."""
    extra_tools: list[Tool] = field(default_factory=list)
    workspace_for: Callable[[Task], AbstractContextManager[Path | None]] | None = None
    """Where each attempt works (default: a scratch directory laid out from the task)."""

    def __post_init__(self) -> None:
        if self.carried_reflections < 0 or self.retrieved_lessons < 0:
            raise UserError("carried_reflections and retrieved_lessons must be 0 or more")


@dataclass
class Loop:
    actor: Actor
    evaluator: Evaluator
    settings: LoopSettings
    reflector: Reflector | None = None
    memory: Memory | None = None
    run_id: str = ""

    def __post_init__(self) -> None:
        if self.memory:  # past verdicts and hidden details are no business of the box
            sandbox.hide(self.memory.directory)

    def run_episode(
        self,
        task: Task,
        episode_id: str | None = None,
        position: int = 0,
        first: tuple[Attempt, Verdict] | None = None,
    ) -> Episode:
        """One task under the strategy; an episode id already in the log is resumed.

        `first`: a trial 1 already made without lessons (a paired study shares it)."""
        s = self.settings
        trials = 1 if s.strategy == "react" else s.trials
        episode = self._resumed(task, episode_id, position)
        reflections = list(episode_reflections(episode, self.memory))
        reflects = self.reflector is not None and s.strategy.startswith("reflexion")
        if reflects and self.memory and self.memory.reflection_pending(episode):
            given = self.memory.lessons(episode.attempts[-1].lesson_ids)  # a crash cut it short
            reflections += self._reflect(task, episode, given, len(episode.attempts) >= trials)
        for trial in range(len(episode.attempts) + 1, trials + 1):
            if episode.passed:
                break
            lessons = self._lessons_for(task, reflections, episode, trial)
            texts, carried = carry_over(task, episode, lessons, s.carry, s.strategy)
            if first and trial == 1 and not lessons:
                attempt, verdict = first[0].model_copy(deep=True), first[1].model_copy(deep=True)
            else:
                with self._workspace(task) as workspace:
                    attempt = self.actor.run(
                        task.id, task.prompt, self._tools(task, workspace),
                        lessons=texts, carried=carried,
                        lesson_ids=[lesson.id for lesson in lessons], trial=trial,
                        budget=self.actor.settings.budget_for(task.budget),
                        on_step=self._step_logger(episode.id, trial),
                        resume=self._unfinished(episode.id, trial),
                    )  # fmt: skip
                    verdict = self.evaluator.evaluate(task, attempt, workspace)
            episode.attempts.append(attempt)
            episode.verdicts.append(verdict)
            episode.passed = verdict.passed
            if self.memory:
                self.memory.finish_attempt(episode, attempt, verdict, lessons)
            if self.reflector and s.strategy.startswith("reflexion"):
                reflections += self._reflect(task, episode, lessons, last=trial == trials)
        if self.memory:
            self.memory.finish_episode(episode)
        return episode

    # ------------------------------------------------------------ what differs

    def _lessons_for(
        self, task: Task, reflections: list[Lesson], episode: Episode, trial: int
    ) -> list[Lesson]:
        """The episode's last few diagnoses; with memory, general lessons from the store first."""
        s = self.settings
        if not s.strategy.startswith("reflexion"):
            return []
        carried = [r for r in reflections if r.validity.status in ("candidate", "validated")]
        diagnoses = [r for r in carried if r.kind == "diagnosis"]
        lessons = diagnoses[-s.carried_reflections :] if s.carried_reflections > 0 else []
        if s.strategy == "reflexion-memory" and self.memory:
            known = {lesson.id for lesson in lessons} | set(episode.lessons_written)
            found = self.memory.retrieve(
                task, s.retrieved_lessons, known, episode.id, trial, min_similarity=s.min_similarity
            )
            lessons = found + lessons
        return lessons

    def _reflect(
        self, task: Task, episode: Episode, given: list[Lesson], last: bool
    ) -> list[Lesson]:
        """A diagnosis after a failure (not after the last trial), with memory also a general
        lesson for the store; with memory, an insight after a pass that followed a failure.
        Returns what this episode carries on: its diagnoses."""
        assert self.reflector is not None
        attempt, verdict = episode.attempts[-1], episode.verdicts[-1]
        memory_strategy = self.settings.strategy == "reflexion-memory"
        if verdict.passed and memory_strategy and len(episode.attempts) > 1:
            failed, failed_verdict = episode.attempts[-2], episode.verdicts[-2]
            written = self.reflector.insight(task, failed, failed_verdict, attempt, episode.id)
            replaces: dict[str, list[Lesson]] = {}
        elif not verdict.passed and not last:
            reflection = self.reflector.reflect(task, attempt, verdict, given, episode.id)
            general = reflection.lessons if memory_strategy else []
            written = ([reflection.diagnosis] if reflection.diagnosis else []) + general
            replaces = reflection.replaces
        else:
            return []
        attempt.charge("reflector", self.reflector.take_usage())
        written = unseen(written, episode_reflections(episode, self.memory) + given)
        kept = []
        for lesson in written:
            persistent = memory_strategy and lesson.kind != "diagnosis"
            stored = self.memory.keep(lesson, persistent=persistent) if self.memory else lesson
            for old in replaces.get(lesson.id, []):
                if old.id != stored.id:
                    self._supersede(old, stored, episode)
            kept.append(stored)
        episode.lessons_written += [lesson.id for lesson in kept]
        if self.memory:
            self.memory.note_written(episode)
        return [lesson for lesson in kept if lesson.kind == "diagnosis"]

    def _supersede(self, old: Lesson, new: Lesson, episode: Episode) -> None:
        if self.memory:
            self.memory.supersede(old, new.id, episode.id, len(episode.attempts))
        else:
            old.validity.status, old.validity.superseded_by = "superseded", new.id

    # ------------------------------------------------------------ plumbing

    def _resumed(self, task: Task, episode_id: str | None, position: int) -> Episode:
        if self.memory and episode_id:
            found = self.memory.resume_episode(episode_id)
            if found:
                return found
        episode = Episode(
            id=episode_id or uuid.uuid4().hex[:12],
            run_id=self.run_id,
            task_id=task.id,
            strategy=self.settings.strategy,
        )
        if self.memory:
            self.memory.start_episode(episode, position)
        return episode

    def _step_logger(self, episode_id: str, trial: int) -> Callable[[Step], None] | None:
        return self.memory.step_logger(episode_id, trial) if self.memory else None

    def _unfinished(self, episode_id: str, trial: int) -> list[Step] | None:
        """Steps of this trial logged before a crash, with orphan calls closed."""
        return self.memory.log.unfinished_steps(episode_id, trial) if self.memory else None

    def _workspace(self, task: Task) -> AbstractContextManager[Path | None]:
        if self.settings.workspace_for:
            return self.settings.workspace_for(task)
        needed = task.workspace is not None or bool(WORKSPACE_TOOLS & set(task.tools))
        return sandbox.ScratchWorkspace(task.workspace if needed else None, enabled=needed)

    def _tools(self, task: Task, workspace: Path | None) -> list[Tool]:
        return build_tools(
            task.tools,
            workspace=workspace,
            scratch_workspace=True,
            documents=task.documents,
            extra=self.settings.extra_tools,
            network=task.network,
        )


def episode_reflections(episode: Episode, memory: Memory | None) -> list[Lesson]:
    """The lessons an episode wrote so far (after a resume, from the log)."""
    if not memory or not episode.lessons_written:
        return []
    return memory.lessons(episode.lessons_written)
