"""Memory: the episode log and the lesson store behind one small interface for the loop."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from mulligan.memory.embeddings import Embedder
from mulligan.memory.log import EpisodeLog
from mulligan.memory.store import LessonStore
from mulligan.memory.validity import ValidityRules, apply_outcome
from mulligan.schema import Attempt, Episode, Lesson, Step, Task, Verdict

log = logging.getLogger("mulligan")


class Memory:
    """`directory` holds episodes.db (and the embedded lesson store unless `store` is a URL)."""

    def __init__(
        self,
        directory: str | Path,
        embedder: Callable[[], Embedder] | Embedder | None = None,
        *,
        store: str | None = None,
        rules: ValidityRules | None = None,
    ) -> None:
        self.directory = Path(directory).expanduser()
        self.log = EpisodeLog(self.directory / "episodes.db")
        self.rules = rules or ValidityRules()
        self._store_location = store or str(self.directory / "lessons")
        self._embedder = embedder
        self._store: LessonStore | None = None
        self._stored_ids: set[str] = set()
        """Lessons known to be in the store (kept persistently or retrieved from it)."""

    @property
    def store(self) -> LessonStore:
        """Opened on first use: runs that never touch the store need no embedding model."""
        if self._store is None:
            if self._embedder is None:
                from mulligan.memory.embeddings import HashEmbedding

                self._embedder = HashEmbedding()
            embedder = self._embedder() if callable(self._embedder) else self._embedder
            self._store = LessonStore(self._store_location, embedder)
        return self._store

    # ------------------------------------------------------------ episodes

    def start_episode(self, episode: Episode, position: int = 0) -> None:
        self.log.start_episode(episode, position)

    def load_episode(self, episode_id: str) -> Episode | None:
        return self.log.episode(episode_id)

    def step_logger(self, episode_id: str, trial: int) -> Callable[[Step], None]:
        return lambda step: self.log.log_step(episode_id, trial, step)

    def finish_attempt(
        self, episode: Episode, attempt: Attempt, verdict: Verdict, given: list[Lesson]
    ) -> None:
        """Log the attempt, then count `helped` or `hurt` on every lesson it was given."""
        self.log.log_attempt(episode, attempt, verdict)
        for lesson in given:
            changed = apply_outcome(lesson, verdict.passed, self.rules)
            event = "helped" if verdict.passed else "hurt"
            self.log.lesson_event(lesson.id, event, episode.id, attempt.trial)
            if changed:
                self.log.lesson_event(lesson.id, f"status:{changed}", episode.id, attempt.trial)
            self._save(lesson)

    def note_written(self, episode: Episode) -> None:
        """Persist which lessons the episode wrote so far (a resume carries them over)."""
        self.log.set_lessons_written(episode.id, episode.lessons_written)

    def finish_episode(self, episode: Episode) -> None:
        self.log.end_episode(episode)

    # ------------------------------------------------------------ lessons

    def keep(self, lesson: Lesson, *, persistent: bool) -> Lesson:
        """Record a new lesson; with `persistent`, also in the store (or strengthen its twin)."""
        if self.rules.ttl_days and lesson.validity.expires_at is None:
            lesson.validity.expires_at = lesson.source.created_at + self.rules.ttl_days * 86400
        kept, new = lesson, True
        if persistent:
            kept, new = self.store.add_or_strengthen(lesson)
            self._stored_ids.add(kept.id)
        self.log.log_lesson(kept)
        event = "created" if new else "reinforced"
        self.log.lesson_event(kept.id, event, lesson.source.episode_id, lesson.source.trial)
        return kept

    def retrieve(
        self,
        task: Task,
        k: int,
        exclude: set[str] | None = None,
        episode_id: str = "",
        trial: int = 0,
        *,
        min_similarity: float = 0.0,
    ) -> list[Lesson]:
        found = self.store.search(
            task.prompt, k, family=task.family, exclude=exclude, min_similarity=min_similarity
        )
        lessons = []
        for lesson, score in found:
            lesson.validity.retrieved += 1
            self._stored_ids.add(lesson.id)
            detail = f"{task.id} score {score:.3f}"
            self.log.lesson_event(lesson.id, "retrieved", episode_id, trial, detail)
            lessons.append(lesson)
        self.store.put(lessons)
        for lesson in lessons:
            self.log.log_lesson(lesson)
        return lessons

    def supersede(self, old: Lesson, new_id: str, episode_id: str = "", trial: int = 0) -> None:
        """The reflector wrote a better lesson in place of `old`: it is no longer used."""
        old.validity.status = "superseded"
        old.validity.superseded_by = new_id
        self._save(old)
        self.log.lesson_event(old.id, "status:superseded", episode_id, trial, f"by {new_id}")

    def lessons(self, ids: list[str]) -> list[Lesson]:
        return self.log.lessons(ids)

    def retract(self, lesson_id: str) -> Lesson | None:
        found = self.store.get([lesson_id]) or self.log.lessons([lesson_id])
        if not found:
            return None
        lesson = found[0]
        lesson.validity.status = "retracted"
        self._save(lesson)
        self.log.lesson_event(lesson_id, "status:retracted", detail="retracted by the user")
        return lesson

    def _save(self, lesson: Lesson) -> None:
        self.log.log_lesson(lesson)
        if self._in_store(lesson.id):
            self.store.put([lesson])

    def _in_store(self, lesson_id: str) -> bool:
        """Without opening the store (and its embedding) for runs that never used it."""
        if lesson_id in self._stored_ids:
            return True
        return self._store is not None and bool(self._store.get([lesson_id]))
