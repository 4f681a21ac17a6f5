"""Which candidate a later attempt is assigned, and what its outcome adds to the evidence:
verification while working (the design: mulligan/memory/assignment.py, docs/memory.md).

`Memory.recall` and `Memory.record_outcome` are the API; this is what they ask."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mulligan.memory.assignment import (
    Assignment,
    assign,
    at,
    judge,
    of_episode,
    of_lesson,
    withheld,
)
from mulligan.memory.log import EpisodeLog
from mulligan.memory.validity import GENERAL, ValidityRules
from mulligan.schema import Lesson, Task

log = logging.getLogger("mulligan")

Search = Callable[[Task, int, set[str], float], list[Lesson]]
"""The top-k active lessons for a task (what `--show-candidates` would show), skipping ids."""
Change = Callable[..., list[Lesson]]
"""`Memory.change`: lessons changed in one transaction of the log, events logged."""


class InWorkVerification:
    def __init__(self, episodes: EpisodeLog, search: Search, change: Change) -> None:
        self.episodes, self.search, self.change = episodes, search, change

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
        made: list[Assignment] = []

        def take(fresh: Lesson) -> list[str]:
            made.append(assign(self.episodes.db.conn, episode_id, trial, task.id, fresh.id))
            fresh.validity.retrieved += made[-1].shown  # the online count of times shown
            return []

        self.change([lesson], "assigned", take, episode_id=episode_id, trial=trial, once=True)
        found = made[0] if made else self.assignment(episode_id, trial)
        if found is None or not found.shown or lesson.validity.status != "candidate":
            return []  # (resumed after it was settled: shown as its status says, or not)
        shown = lesson.model_copy(deep=True)
        shown.validity.status = "validated"  # shown as it would be once validated: unmarked
        return [shown]

    def judged(
        self, episode_id: str, trial: int, passed: bool | None, rules: ValidityRules
    ) -> None:
        """The attempt's outcome on its assignment, if it had one (see `assignment.judge`),
        once however often a resumed run gets here."""
        found = self.assignment(episode_id, trial) if episode_id else None
        if found is None or found.told is not None:
            return
        lesson = self.episodes.lessons([found.lesson_id])
        if not lesson:
            log.warning("lesson %s of an assignment is not in the log", found.lesson_id)
            return
        outcome = "told nothing" if passed is None else "passed" if passed else "failed"

        def record(fresh: Lesson) -> list[str]:
            return judge(self.episodes.db.conn, fresh, episode_id, trial, passed, rules)

        self.change(
            lesson, "judged", record, episode_id=episode_id, trial=trial, once=True,
            details=[f"{found.task_id}: {found.arm}, {outcome}"],
        )  # fmt: skip

    def assignment(self, episode_id: str, trial: int) -> Assignment | None:
        return at(self.episodes.db.conn, episode_id, trial)

    def of_lesson(self, lesson_id: str) -> list[Assignment]:
        """Every attempt assigned for the lesson, in order (`memory show`, the viewer)."""
        return of_lesson(self.episodes.db.conn, lesson_id)

    def withheld(self, lesson_ids: list[str] | None = None) -> tuple[int, int]:
        """Of the attempts assigned without their candidate that told something, how many
        passed: the pass rate chance is measured against."""
        return withheld(self.episodes.db.conn, lesson_ids)

    def _candidate(
        self, task: Task, episode_id: str, trial: int, exclude: set[str], k: int, floor: float
    ) -> Lesson | None:
        """The attempt's candidate: the one it was assigned before a crash; else the one an
        earlier attempt of its episode was assigned, while it is still a candidate; else,
        of the candidates among the task's top-k active lessons (never one written on this
        task or in this episode), the one with the fewest pairs, the nearest first."""
        earlier = of_episode(self.episodes.db.conn, episode_id)
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
            if lesson.source.task_id != task.id
        ]
        return min(ranked, key=lambda x: x.validity.evidence.pairs) if ranked else None


def _one(found: list[Any]) -> Any:
    return found[0] if found else None
