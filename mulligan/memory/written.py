"""What the loop keeps after an attempt, whole or not at all: the lessons a reflection or an
insight wrote, the case a passing attempt makes, and the lessons in play that each new one
supersedes.

`Memory.keep_written` logs it first, with the attempt charged for the reply, in one
transaction (the reply is the intent); then it stores what goes to the lesson store, each
lesson once; then it logs every lesson, event and supersession in one more transaction,
with the reflection marked done. A kill before the first transaction leaves nothing and a
resume asks again; a kill after it leaves a resume to finish what the reply says
(`Memory.reflection_to_redo`), asking nothing."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pydantic import Field

from mulligan.memory.lesson_log import reinforced, to_status, unchanged
from mulligan.memory.log import EpisodeLog, LessonChanges
from mulligan.memory.validity import ValiditySection
from mulligan.schema import Episode, Lesson, Record

if TYPE_CHECKING:
    from mulligan.memory.store import LessonStore

log = logging.getLogger("mulligan")


class Written(Record):
    lessons: list[Lesson] = Field(default_factory=list)
    """The reflection's diagnosis and general lessons, or the insight: what the episode wrote."""
    case: Lesson | None = None
    """The passing attempt as a worked example (mulligan/cases.py): stored, not the episode's."""
    to_store: bool = False
    """The general lessons go to the lesson store too (a strategy that writes it)."""
    replaces: dict[str, list[Lesson]] = Field(default_factory=dict)
    """New lesson id -> the lessons in play it supersedes."""

    def all(self) -> list[Lesson]:
        return self.lessons + ([self.case] if self.case else [])

    def stores(self, lesson: Lesson) -> bool:
        """Whether the lesson goes to the lesson store: a case always, a diagnosis never."""
        return lesson.kind == "case" or (self.to_store and lesson.kind != "diagnosis")


class KeepsWritten:
    """`Memory`'s part that keeps a `Written` whole, and finishes or redoes one a crash cut
    short (see the module's docstring)."""

    log: EpisodeLog
    rules: ValiditySection
    frozen: bool
    _stored_ids: set[str]

    _store: LessonStore | None

    if TYPE_CHECKING:  # Memory's

        @property
        def store(self) -> LessonStore: ...

    def reflection_to_redo(self, episode: Episode) -> bool:
        """Whether the latest attempt's reflection must be asked for again: a crash cut it
        short before its reply was logged. One whose reply was logged is finished from it here
        (`finish_written`); one from before replies were logged that kept lessons is done."""
        trial = episode.attempts[-1].trial if episode.attempts else 0
        if not trial or not self.log.reflection_pending(episode.id, trial):
            return False
        reply = self.log.reply(episode.id, trial)
        if reply is not None:
            self.finish_written(episode, Written.model_validate_json(reply))
            return False
        kept = self.log.lessons_with("created", episode.id, trial)
        if not kept:
            return True
        episode.lessons_written += [i for i in kept if i not in episode.lessons_written]
        self.log.reflection_done(episode.id, trial, episode.lessons_written)
        return False

    def keep_written(self, episode: Episode, written: Written) -> list[Lesson]:
        """Keep what was written after the episode's last attempt, whole or not at all
        (memory/written.py): the reply first, with the attempt's charges, then its lessons."""
        for lesson in written.all():
            if self.rules.ttl_days and lesson.validity.expires_at is None:
                lesson.validity.expires_at = lesson.source.created_at + self.rules.ttl_days * 86400
        attempt, verdict = episode.attempts[-1], episode.verdicts[-1]
        self.log.log_reply(episode, attempt, verdict, written.model_dump_json())
        return self.finish_written(episode, written)

    def finish_written(self, episode: Episode, written: Written) -> list[Lesson]:
        """A logged reply's lessons kept: each one for the store stored once (or its twin
        strengthened), then in one transaction every lesson, event and supersession, what the
        episode wrote, and that the reflection is done; then the store's copies of the lessons
        changed. Returns the reply's lessons as kept (a twin for one it repeats)."""
        if self.frozen and any(written.stores(lesson) for lesson in written.all()):
            raise RuntimeError("the lesson store is frozen: nothing written is stored")
        changes: list[LessonChanges] = []
        kept: list[tuple[int, Lesson]] = []  # (the change that keeps it, the lesson)
        for lesson in written.all():
            episode_id, trial = lesson.source.episode_id, lesson.source.trial
            stored = written.stores(lesson)
            twin = self._store_once(lesson) if stored else None
            if twin is None:
                change = LessonChanges([lesson], "created", unchanged, episode_id, trial)
            else:
                change = LessonChanges([twin], "reinforced", reinforced, episode_id, trial)
            change.stored = stored
            changes.append(change)
            if lesson is not written.case:
                kept.append((len(changes) - 1, change.lessons[0]))
            for old in written.replaces.get(lesson.id, []):
                if old.id != change.lessons[0].id:
                    new_id = change.lessons[0].id
                    changes += self._superseding(old, new_id, episode.id, len(episode.attempts))
        trial = episode.attempts[-1].trial
        lessons_written = episode.lessons_written + [lesson.id for _, lesson in kept]
        now = self.log.keep_written(changes, episode.id, trial, lessons_written)
        episode.lessons_written = lessons_written
        for change, fresh in zip(changes, now, strict=True):
            for mine, lesson in zip(change.lessons, fresh, strict=True):
                mine.validity = lesson.validity.model_copy()  # the callers' copies follow the log
        self._recache([c.lessons[0] for c in changes if c.event != "created"])
        return [now[n][0] for n, _ in kept]

    def _store_once(self, lesson: Lesson) -> Lesson | None:
        """Store a new lesson; returns the stored twin it repeats instead, if any. One the store
        holds by its id already was stored by this reply before a crash: new, not a twin."""
        if not self.store.get([lesson.id]):
            twin, new = self.store.add_or_strengthen(lesson)
            if not new:
                self._stored_ids.add(twin.id)
                return twin
        self._stored_ids.add(lesson.id)
        return None

    def _superseding(
        self, old: Lesson, new_id: str, episode_id: str, trial: int
    ) -> list[LessonChanges]:
        """`old` superseded by lesson `new_id` (nothing: a frozen store's lesson)."""
        if self.frozen and self._stored([old.id]):
            log.info("lesson %s not superseded by %s: the store is frozen", old.id, new_id)
            return []
        mark = to_status("superseded", new_id)
        return [
            LessonChanges([old], "status:superseded", mark, episode_id, trial, [f"by {new_id}"])
        ]

    def _recache(self, now: list[Lesson]) -> None:
        """The store's cached copy of lessons the log changed, rewritten from the log."""
        ids = list(dict.fromkeys(lesson.id for lesson in now))
        stored = self._stored(ids)
        if stored:
            self.store.refresh([i for i in ids if i in stored], self.log.lessons)

    def _stored(self, ids: list[str]) -> set[str]:
        """Which of these lessons are in the store."""
        stored = self._stored_ids & set(ids)
        stored |= self.log.stored_ids([i for i in ids if i not in stored])
        if self._store is not None:
            stored |= {lesson.id for lesson in self._store.get([i for i in ids if i not in stored])}
        return stored
