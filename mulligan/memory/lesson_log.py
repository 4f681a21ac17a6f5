"""The episode log's lesson tables: each lesson's record (where its counters live) and its
events. Part of `EpisodeLog` (mulligan/memory/log.py), which holds the connection; every
change to lessons is one transaction, or part of a larger one (`LessonChanges`)."""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from mulligan.schema import Lesson, LessonStatus

if TYPE_CHECKING:
    import sqlite_utils

LessonChange = Callable[[Lesson], list[str]]
"""Changes a lesson in place; returns the further events (e.g. `status:refuted`) it caused."""
HAD_EVENT = (
    "select 1 from lesson_events"
    " where lesson_id = ? and event = ? and episode_id = ? and trial = ? limit 1"
)


def unchanged(lesson: Lesson) -> list[str]:
    return []


def reinforced(twin: Lesson) -> list[str]:
    """The reflector wrote this lesson again: its twin was folded into it."""
    twin.validity.reinforced += 1
    return []


def to_status(status: LessonStatus, superseded_by: str | None = None) -> LessonChange:
    """The change that gives a lesson `status` (superseded: by the lesson `superseded_by`)."""

    def change(lesson: Lesson) -> list[str]:
        lesson.validity.status = status
        if superseded_by is not None:
            lesson.validity.superseded_by = superseded_by
        return []

    return change


@dataclass
class LessonChanges:
    """Lessons to change, logged as `event` (see `LessonLog.change_lessons`)."""

    lessons: list[Lesson]
    event: str
    change: LessonChange
    episode_id: str = ""
    trial: int = 0
    details: list[str] = field(default_factory=list)
    once: bool = False
    stored: bool = False


Log = TypeVar("Log", bound="LessonLog")
Given = ParamSpec("Given")
Made = TypeVar("Made")


def serialized(
    method: Callable[Concatenate[Log, Given], Made],
) -> Callable[Concatenate[Log, Given], Made]:
    """One thread at a time on the shared connection (bench runs tasks on threads); the
    method's signature kept, so its callers are type-checked."""

    @functools.wraps(method)
    def wrapper(self: Log, /, *args: Given.args, **kwargs: Given.kwargs) -> Made:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


class LessonLog:
    _lock: contextlib.AbstractContextManager[None]

    if TYPE_CHECKING:  # EpisodeLog's

        @property
        def db(self) -> sqlite_utils.Database: ...

    @serialized
    def log_lesson(self, lesson: Lesson, stored: bool = False) -> None:
        """Write a whole new record (counters change only through `change_lessons`)."""
        self.db.table("lessons").upsert(
            {
                "id": lesson.id,
                "text": lesson.text,
                "kind": lesson.kind,
                "status": lesson.validity.status,
                "record": lesson.model_dump_json(),
                "updated_at": time.time(),
            }
            | ({"stored": 1} if stored else {}),
            pk="id",
        )

    @serialized
    def lessons(self, ids: list[str]) -> list[Lesson]:
        if not ids:
            return []
        marks = ",".join("?" for _ in ids)
        rows = {r["id"]: r for r in self.db.table("lessons").rows_where(f"id in ({marks})", ids)}
        return [Lesson.model_validate_json(rows[i]["record"]) for i in ids if i in rows]

    @serialized
    def lesson_event(
        self, lesson_id: str, event: str, episode_id: str = "", trial: int = 0, detail: str = ""
    ) -> None:
        self.db.table("lesson_events").insert(
            {
                "lesson_id": lesson_id,
                "event": event,
                "episode_id": episode_id,
                "trial": trial,
                "detail": detail,
                "at": time.time(),
            }
        )

    @serialized
    def lesson_events(self, lesson_id: str | None = None) -> list[dict[str, Any]]:
        where, args = ("lesson_id = ?", [lesson_id]) if lesson_id else (None, [])
        return list(self.db.table("lesson_events").rows_where(where, args, order_by="id"))

    @serialized
    def known_ids(self, ids: list[str], *, stored: bool = False) -> set[str]:
        """Which of these lessons the log holds a record of (`stored`: that are also in the
        lesson store), 500 ids a query (SQLite's limit on parameters)."""
        only_stored = "stored = 1 and " if stored else ""
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" for _ in chunk)
            query = f"select id from lessons where {only_stored}id in ({marks})"
            found |= {row[0] for row in self.db.conn.execute(query, chunk)}
        return found

    def stored_ids(self, ids: list[str]) -> set[str]:
        return self.known_ids(ids, stored=True)  # the lessons also in the lesson store

    @serialized
    def change_lessons(
        self,
        lessons: list[Lesson],
        event: str,
        change: LessonChange,
        *,
        episode_id: str = "",
        trial: int = 0,
        details: list[str] | None = None,
        once: bool = False,
        stored: bool = False,
    ) -> list[Lesson]:
        """Change lessons and log the events in one transaction, atomic against every writer.

        `change` gets each lesson as this log has it now (one the log has never seen: as
        given), changes it in place and returns the further events it caused (a status
        change). The rest as in `LessonChanges`; with `once`, a lesson that already has
        `event` for this episode's trial is left as it is (a resumed run counts nothing
        twice). Returns the lessons as they now are.
        """
        changes = LessonChanges(
            lessons, event, change, episode_id, trial, details or [], once, stored
        )
        with self._immediate() as conn:
            return self._changed(conn, changes)

    def _changed(self, conn: sqlite3.Connection, changes: LessonChanges) -> list[Lesson]:
        """`change_lessons` inside a transaction already open."""
        now, result = time.time(), []
        for n, given in enumerate(changes.lessons):
            row = conn.execute("select record from lessons where id = ?", [given.id]).fetchone()
            lesson = Lesson.model_validate_json(row[0]) if row else given.model_copy(deep=True)
            result.append(lesson)
            where = [lesson.id, changes.event, changes.episode_id, changes.trial]
            if changes.once and conn.execute(HAD_EVENT, where).fetchone():
                continue
            detail = changes.details[n] if changes.details else ""
            events = [(changes.event, detail)] + [(e, "") for e in changes.change(lesson)]
            conn.execute(
                "insert into lessons (id, text, kind, status, record, updated_at, stored)"
                " values (?, ?, ?, ?, ?, ?, ?) on conflict(id) do update set"
                " status = excluded.status, record = excluded.record,"
                " updated_at = excluded.updated_at, stored = max(stored, excluded.stored)",
                [lesson.id, lesson.text, lesson.kind, lesson.validity.status,
                 lesson.model_dump_json(), now, int(changes.stored)],
            )  # fmt: skip
            conn.executemany(
                "insert into lesson_events (lesson_id, event, episode_id, trial, detail, at)"
                " values (?, ?, ?, ?, ?, ?)",
                [(lesson.id, name, changes.episode_id, changes.trial, text, now)
                 for name, text in events],
            )  # fmt: skip
        return result

    @serialized
    def lessons_with(self, event: str, episode_id: str, trial: int) -> list[str]:
        """The lessons that had `event` at this trial (before a crash: 'retrieved' by it,
        'created' by its reflection), in order."""
        query = (
            "select lesson_id from lesson_events"
            " where event = ? and episode_id = ? and trial = ? order by id"
        )
        return [row[0] for row in self.db.conn.execute(query, [event, episode_id, trial])]

    @serialized
    def lessons_touched(self, episode_id: str) -> list[str]:
        """The lessons that had any event in this episode, in order of their first."""
        query = "select lesson_id from lesson_events where episode_id = ? order by id"
        found = [row[0] for row in self.db.conn.execute(query, [episode_id])]
        return list(dict.fromkeys(found))

    @contextlib.contextmanager
    def _immediate(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds SQLite's write lock from its first read."""
        conn = self.db.conn
        if conn.in_transaction:
            conn.commit()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.rollback()
            raise
        conn.commit()
