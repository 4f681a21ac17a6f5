"""Which candidate a later attempt is assigned, and what its outcome adds to the evidence:
verification while working (the design: mulligan/memory/assignment.py, docs/memory.md).

`Memory.recall` and `Memory.record_outcome` are the API; this is what they ask. Everything
it reads or writes goes through the episode log's methods, so a Ray worker's memory, whose
log forwards each call to the driver, verifies as a thread's does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mulligan.memory.log import EpisodeLog
from mulligan.memory.validity import GENERAL, ValiditySection
from mulligan.schema import Lesson, Task

Search = Callable[[Task, int, set[str], float], list[Lesson]]
"""The top-k active lessons for a task (what `--show-candidates` would show), skipping ids."""
Recache = Callable[[list[Lesson]], None]
"""Refresh the lesson store's cached copy of lessons the log changed."""


class InWorkVerification:
    def __init__(self, episodes: EpisodeLog, search: Search, recache: Recache) -> None:
        self.episodes, self.search, self.recache = episodes, search, recache

    def tried(
        self, task: Task, episode_id: str, trial: int, exclude: set[str], k: int, floor: float
    ) -> list[Lesson]:
        """The candidate this attempt is shown by assignment ([] when it is withheld, when
        nothing is to be verified here, and always at trial 1). Logged before the attempt
        is made; a resumed attempt gets the arm its first start got."""
        if trial < 2 or not episode_id:
            return []
        lesson = self._candidate(task, episode_id, trial, exclude, k, floor)
        if lesson is None:
            return []
        found, now = self.episodes.assign_attempt(episode_id, trial, task.id, lesson)
        self.recache(now)
        if not found.shown or not now or now[0].validity.status != "candidate":
            return []  # (resumed after it was settled: shown as its status says, or not)
        shown = now[0].model_copy(deep=True)
        shown.validity.status = "validated"  # shown as it would be once validated: unmarked
        return [shown]

    def judged(
        self, episode_id: str, trial: int, passed: bool | None, rules: ValiditySection
    ) -> None:
        """The attempt's outcome on its assignment, if it had one (`assignment.judge`),
        once however often a resumed run gets here."""
        if episode_id:
            self.recache(self.episodes.judge_attempt(episode_id, trial, passed, rules))

    def _candidate(
        self, task: Task, episode_id: str, trial: int, exclude: set[str], k: int, floor: float
    ) -> Lesson | None:
        """The attempt's candidate: the one it was assigned before a crash; else the one an
        earlier attempt of its episode was assigned, while it is still a candidate; else,
        of the candidates among the task's top-k active lessons (never one this episode
        created; one it wrote again, stored before, may be), the one with the fewest pairs,
        the nearest first."""
        earlier = self.episodes.assignments_of_episode(episode_id)
        if trial in earlier:
            return _one(self.episodes.lessons([earlier[trial].lesson_id]))
        for before in sorted(earlier, reverse=True):
            lesson = _one(self.episodes.lessons([earlier[before].lesson_id]))
            if lesson and lesson.validity.status == "candidate" and lesson.id not in exclude:
                return lesson
            break
        ranked = [
            lesson
            for lesson in self.search(task, k, exclude, floor)
            if lesson.validity.status == "candidate" and lesson.kind in GENERAL
            if lesson.source.episode_id != episode_id
        ]
        return min(ranked, key=lambda x: x.validity.evidence.pairs) if ranked else None


def _one(found: list[Any]) -> Any:
    return found[0] if found else None
