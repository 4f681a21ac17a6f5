"""The episode log on SQLite through sqlite-utils: the only module that imports it.

Schema changes are an append-only list of migrations; plain tables, JSON in text columns."""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqlite_utils

from mulligan.memory.assignment import AssignmentLog
from mulligan.memory.migrations import migrate
from mulligan.schema import Attempt, Episode, Lesson, Step, Verdict

LessonChange = Callable[[Lesson], list[str]]
"""Changes a lesson in place; returns the further events (e.g. `status:refuted`) it caused."""


def _serialized(method: Callable[..., Any]) -> Callable[..., Any]:
    """One thread at a time on the shared connection (bench runs tasks on threads)."""

    @functools.wraps(method)
    def wrapper(self: EpisodeLog, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


class EpisodeLog(AssignmentLog):
    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        """`read_only`: an existing log, never written, created or migrated, and no side file
        made: `immutable` while no writer has it open (no -wal file: every commit is in the
        file), else `mode=ro`, sharing the writer's side files and seeing its commits (view)."""
        self.path = Path(path)
        self._lock, self._reading, self._shared = threading.RLock(), read_only, False
        if read_only:
            self._db = self._reader()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, check_same_thread=False, timeout=30)  # busy: 30 s
        self._db = sqlite_utils.Database(connection)
        self.db.enable_wal()
        # WAL + NORMAL: a commit survives a crash of mulligan; only a power cut may lose the last
        self.db.conn.execute("PRAGMA synchronous = NORMAL")
        migrate(self.db)

    @property
    def db(self) -> sqlite_utils.Database:
        if self._reading and not self._shared and Path(f"{self.path}-wal").exists():
            self._db = self._reader()  # a writer opened the log since: follow its commits
        return self._db

    def _reader(self) -> sqlite_utils.Database:
        self._shared = Path(f"{self.path}-wal").exists()
        uri = f"{self.path.resolve().as_uri()}?{'mode=ro' if self._shared else 'immutable=1'}"
        return sqlite_utils.Database(sqlite3.connect(uri, uri=True, check_same_thread=False))

    # ------------------------------------------------------------ self-tests

    @_serialized
    def self_tests(self, run_id: str, task_id: str) -> dict[str, Any] | None:
        """What `keep_self_tests` kept for this run and task (None: none yet)."""
        rows = list(
            self.db.table("self_tests").rows_where("run_id = ? and task_id = ?", [run_id, task_id])
        )
        return {k: json.loads(rows[0][k]) for k in ("tests", "dropped", "usage")} if rows else None

    @_serialized
    def keep_self_tests(self, run_id: str, task_id: str, written: dict[str, Any]) -> None:
        row = {k: json.dumps(written[k]) for k in ("tests", "dropped", "usage")}
        self.db.table("self_tests").insert(
            {"run_id": run_id, "task_id": task_id, **row}, replace=True
        )

    @_serialized
    def run_self_tests(self, run_id: str) -> list[dict[str, Any]]:
        rows = self.db.table("self_tests").rows_where("run_id = ?", [run_id], order_by="task_id")
        return [
            {"task_id": r["task_id"]} | {k: json.loads(r[k]) for k in ("tests", "dropped", "usage")}
            for r in rows
        ]

    # ------------------------------------------------------------ runs

    @_serialized
    def start_run(self, run_id: str, manifest: dict[str, Any]) -> None:
        self.db.table("runs").upsert(
            {
                "id": run_id,
                "started_at": time.time(),
                "status": "running",
                "manifest": json.dumps(manifest, sort_keys=True),
            },
            pk="id",
        )

    @_serialized
    def end_run(self, run_id: str, status: str = "finished") -> None:
        self.db.table("runs").update(run_id, {"ended_at": time.time(), "status": status})

    @_serialized
    def run(self, run_id: str) -> dict[str, Any] | None:
        return next(iter(self.db.table("runs").rows_where("id = ?", [run_id])), None)

    @_serialized
    def runs(self) -> list[dict[str, Any]]:
        return list(self.db.table("runs").rows_where(order_by="started_at"))

    # ------------------------------------------------------------ episodes and attempts

    @_serialized
    def start_episode(self, episode: Episode, position: int = 0) -> None:
        self.db.table("episodes").upsert(
            {
                "id": episode.id,
                "run_id": episode.run_id,
                "task_id": episode.task_id,
                "strategy": episode.strategy,
                "position": position,
                "started_at": time.time(),
                "passed": 0,
                "trials": 0,
                "lessons_written": "[]",
            },
            pk="id",
        )

    @_serialized
    def log_step(self, episode_id: str, trial: int, step: Step) -> None:
        self.db.table("steps").upsert(
            {
                "attempt_id": f"{episode_id}:{trial}",
                "idx": step.index,
                "kind": step.kind,
                "record": step.model_dump_json(),
                "logged_at": time.time(),
            },
            pk=("attempt_id", "idx"),
        )

    @_serialized
    def log_attempt(self, episode: Episode, attempt: Attempt, verdict: Verdict) -> None:
        with self.db.conn:
            self.db.table("attempts").upsert(
                {
                    "id": f"{episode.id}:{attempt.trial}",
                    "episode_id": episode.id,
                    "trial": attempt.trial,
                    "stop_reason": attempt.stop_reason,
                    "answer": attempt.answer,
                    "passed": int(verdict.passed),
                    "score": verdict.score,
                    "steps": len(attempt.steps),
                    "prompt_tokens": attempt.usage.prompt_tokens,
                    "completion_tokens": attempt.usage.completion_tokens,
                    "cost": attempt.usage.cost,
                    "usage_by_role": json.dumps(
                        {role: u.model_dump() for role, u in attempt.usage_by_role.items()}
                    ),
                    "seconds": attempt.seconds,
                    "lesson_ids": json.dumps(attempt.lesson_ids),
                    **{key: json.dumps(v) for key, v in attempt.provenance().items()},
                    "record": attempt.model_dump_json(),
                    "verdict": verdict.model_dump_json(),
                    "finished_at": time.time(),
                },
                pk="id",
            )
            self.db.table("episodes").update(
                episode.id, {"passed": int(verdict.passed), "trials": attempt.trial}
            )

    @_serialized
    def end_episode(self, episode: Episode) -> None:
        self.db.table("episodes").update(
            episode.id,
            {
                "ended_at": time.time(),
                "passed": int(episode.passed),
                "trials": len(episode.attempts),
                "lessons_written": json.dumps(episode.lessons_written),
            },
        )

    @_serialized
    def is_finished(self, episode_id: str) -> bool:
        rows = list(self.db.table("episodes").rows_where("id = ?", [episode_id]))
        return bool(rows and rows[0]["ended_at"])

    @_serialized
    def set_lessons_written(self, episode_id: str, lesson_ids: list[str]) -> None:
        self.db.table("episodes").update(episode_id, {"lessons_written": json.dumps(lesson_ids)})

    @_serialized
    def episode(self, episode_id: str) -> Episode | None:
        rows = list(self.db.table("episodes").rows_where("id = ?", [episode_id]))
        if not rows:
            return None
        row = rows[0]
        attempts = list(
            self.db.table("attempts").rows_where("episode_id = ?", [episode_id], order_by="trial")
        )
        verdicts = [Verdict.model_validate_json(a["verdict"]) for a in attempts]
        episode = Episode(
            id=row["id"],
            run_id=row["run_id"] or "",
            task_id=row["task_id"],
            strategy=row["strategy"],
            attempts=[Attempt.model_validate_json(a["record"]) for a in attempts],
            verdicts=verdicts,
            lessons_written=json.loads(row["lessons_written"] or "[]"),
        )
        episode.passed = bool(verdicts) and verdicts[episode.submitted].passed  # its score
        return episode

    @_serialized
    def episodes(self, run_id: str | None = None) -> list[dict[str, Any]]:
        where, args = ("run_id = ?", [run_id]) if run_id else (None, [])
        rows = self.db.table("episodes").rows_where(where, args, order_by="position, started_at")
        return list(rows)

    @_serialized
    def unfinished_steps(self, episode_id: str, trial: int) -> list[Step]:
        """Steps logged for an attempt that never finished, repaired for sending again."""
        rows = self.db.table("steps").rows_where(
            "attempt_id = ?", [f"{episode_id}:{trial}"], order_by="idx"
        )
        return [Step.model_validate_json(r["record"]).closed() for r in rows]

    # ------------------------------------------------------------ lessons

    @_serialized
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

    @_serialized
    def lessons(self, ids: list[str]) -> list[Lesson]:
        if not ids:
            return []
        marks = ",".join("?" for _ in ids)
        rows = {r["id"]: r for r in self.db.table("lessons").rows_where(f"id in ({marks})", ids)}
        return [Lesson.model_validate_json(rows[i]["record"]) for i in ids if i in rows]

    @_serialized
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

    @_serialized
    def lesson_events(self, lesson_id: str | None = None) -> list[dict[str, Any]]:
        where, args = ("lesson_id = ?", [lesson_id]) if lesson_id else (None, [])
        return list(self.db.table("lesson_events").rows_where(where, args, order_by="id"))

    @_serialized
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

    @_serialized
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
        change). With `once`, a lesson that already has `event` for this episode's trial
        is left as it is (a resumed run counts nothing twice). Returns the lessons as
        they now are.
        """
        now = time.time()
        result = []
        with self._immediate() as conn:
            for n, given in enumerate(lessons):
                row = conn.execute("select record from lessons where id = ?", [given.id]).fetchone()
                lesson = Lesson.model_validate_json(row[0]) if row else given.model_copy(deep=True)
                result.append(lesson)
                if once and self._has_event(conn, lesson.id, event, episode_id, trial):
                    continue
                detail = details[n] if details else ""
                events = [(event, detail)] + [(e, "") for e in change(lesson)]
                conn.execute(
                    "insert into lessons (id, text, kind, status, record, updated_at, stored)"
                    " values (?, ?, ?, ?, ?, ?, ?) on conflict(id) do update set"
                    " status = excluded.status, record = excluded.record,"
                    " updated_at = excluded.updated_at, stored = max(stored, excluded.stored)",
                    [lesson.id, lesson.text, lesson.kind, lesson.validity.status,
                     lesson.model_dump_json(), now, int(stored)],
                )  # fmt: skip
                conn.executemany(
                    "insert into lesson_events (lesson_id, event, episode_id, trial, detail, at)"
                    " values (?, ?, ?, ?, ?, ?)",
                    [(lesson.id, name, episode_id, trial, text, now) for name, text in events],
                )
        return result

    @staticmethod
    def _has_event(
        conn: sqlite3.Connection, lesson_id: str, event: str, episode_id: str, trial: int
    ) -> bool:
        query = (
            "select 1 from lesson_events"
            " where lesson_id = ? and event = ? and episode_id = ? and trial = ? limit 1"
        )
        return conn.execute(query, [lesson_id, event, episode_id, trial]).fetchone() is not None

    @_serialized
    def lessons_with(self, event: str, episode_id: str, trial: int) -> list[str]:
        """The lessons that had `event` at this trial (before a crash: 'retrieved' by it,
        'created' by its reflection), in order."""
        query = (
            "select lesson_id from lesson_events"
            " where event = ? and episode_id = ? and trial = ? order by id"
        )
        return [row[0] for row in self.db.conn.execute(query, [event, episode_id, trial])]

    # ------------------------------------------------------------ reflections

    @_serialized
    def reflection_pending(self, episode_id: str, trial: int) -> bool:
        query = "select reflection from attempts where id = ?"
        row = self.db.conn.execute(query, [f"{episode_id}:{trial}"]).fetchone()
        return bool(row and row[0] == "pending")

    @_serialized
    def reflection_done(self, episode_id: str, trial: int, lessons_written: list[str]) -> None:
        """The reflection on this attempt is made: what it wrote, and that it is done."""
        with self._immediate() as conn:
            conn.execute(
                "update episodes set lessons_written = ? where id = ?",
                [json.dumps(lessons_written), episode_id],
            )
            conn.execute(
                "update attempts set reflection = 'done' where id = ?", [f"{episode_id}:{trial}"]
            )

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
