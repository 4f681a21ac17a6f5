"""The episode log on SQLite through sqlite-utils: the only module that imports it (its
lesson tables: lesson_log.py, on its connection).

Schema changes are an append-only list of migrations; plain tables, JSON in text columns."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import sqlite_utils

from mulligan.errors import UserError
from mulligan.inputs.memory_files import read_only
from mulligan.memory.assignment import AssignmentLog
from mulligan.memory.lesson_log import LessonChange, LessonChanges, serialized
from mulligan.memory.migrations import migrate
from mulligan.sandbox.processes import gone, this_process
from mulligan.schema import Attempt, Episode, Lesson, Step, Verdict

__all__ = ["EpisodeLog", "LessonChange", "LessonChanges", "UnreadableLog"]


class UnreadableLog(UserError):
    """The episode log is damaged: SQLite cannot read it, or a part of it."""


class LogLock:
    """One thread at a time on the log's connection (bench runs tasks on threads); SQLite's
    complaint that the file is damaged, raised inside, as an `UnreadableLog` naming it."""

    def __init__(self, path: Path) -> None:
        self.path, self._lock = path, threading.RLock()

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        self._lock.release()
        if kind is sqlite3.DatabaseError:  # (not its subclasses: a busy or locked file, a bug)
            raise UnreadableLog(
                f"{self.path} is unreadable ({exc}); restore it from a copy, or save what is "
                "left: `sqlite3 episodes.db .recover`"
            ) from None


BUSY_SECONDS = 30.0
"""How long opening the log to write waits for another process writing it."""


def _unwritable(path: Path, exc: sqlite3.OperationalError) -> UserError | None:
    """Why the log could not be opened to write, in one line: another writer held it past the
    wait, or the file or its directory may not be written (None: neither, a bug)."""
    if "locked" in str(exc) or "busy" in str(exc):
        return UserError(
            f"{path}: another process is writing the episode log (it stayed locked for "
            f"{BUSY_SECONDS:g} s); let it finish or stop it, then run again"
        )
    if "readonly" in str(exc) or "unable to open" in str(exc):
        return cannot_write(path, str(exc))
    return None


def cannot_write(path: Path, why: str) -> UserError:
    return UserError(
        f"{path}: cannot be written ({why}); make it and its directory writable, or pass a "
        "--memory that is (a copy: cp -a)"
    )


class EpisodeLog(AssignmentLog):
    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        """`read_only`: an existing log, never written, created or migrated, and no side file
        made: `immutable` while no writer has it open (no -wal file: every commit is in the
        file) and the file is as it was when opened, else `mode=ro`, sharing the writer's side
        files and seeing its commits (view)."""
        self.path = Path(path)
        self._lock, self._reading, self._shared = LogLock(self.path), read_only, False
        self.migrated: list[str] = []
        """The migrations opening it applied (none: it was up to date, or only read)."""
        if read_only:
            self._db = self._reader()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for place in (self.path, self.path.parent):  # before SQLite makes a side file there
            if place.exists() and not os.access(place, os.W_OK):
                raise cannot_write(self.path, f"no permission to write {place}")
        connection = sqlite3.connect(self.path, check_same_thread=False, timeout=BUSY_SECONDS)
        self._db = sqlite_utils.Database(connection)
        try:
            with self._lock:
                self.db.enable_wal()
                # WAL + NORMAL: a commit survives a crash of mulligan; a power cut may lose the last
                self.db.conn.execute("PRAGMA synchronous = NORMAL")
                self.migrated = migrate(self.db, str(self.path))
        except BaseException as exc:
            connection.close()  # (the side files it made go with it)
            refusal = isinstance(exc, sqlite3.OperationalError) and _unwritable(self.path, exc)
            if refusal:
                raise refusal from exc
            raise

    def close(self) -> None:
        """Closed: a log opened to write leaves every commit in its file, and no side file."""
        with self._lock:
            self._db.conn.close()

    @property
    def db(self) -> sqlite_utils.Database:
        if self._reading and not self._shared and self._state() != self._opened:
            self._db = self._reader()  # a writer has the log open, or wrote it and closed it
        return self._db

    def _state(self) -> tuple[bool, int, int, int]:
        """Whether a writer has the log open (its -wal file), and the file's identity, size
        and last change: what an `immutable` reader's pages stay true for."""
        try:
            found = self.path.stat()
        except OSError:  # gone: opening it again says so
            return False, 0, 0, 0
        wal = Path(f"{self.path}-wal").exists()
        return wal, found.st_ino, found.st_size, found.st_mtime_ns

    def _reader(self) -> sqlite_utils.Database:
        self._opened = self._state()
        self._shared = self._opened[0]
        return sqlite_utils.Database(read_only(self.path, self._shared))

    # ------------------------------------------------------------ self-tests

    @serialized
    def self_tests(self, run_id: str, task_id: str) -> dict[str, Any] | None:
        """What `keep_self_tests` kept for this run and task (None: none yet)."""
        rows = list(
            self.db.table("self_tests").rows_where("run_id = ? and task_id = ?", [run_id, task_id])
        )
        return {k: json.loads(rows[0][k]) for k in ("tests", "dropped", "usage")} if rows else None

    @serialized
    def keep_self_tests(self, run_id: str, task_id: str, written: dict[str, Any]) -> None:
        row = {k: json.dumps(written[k]) for k in ("tests", "dropped", "usage")}
        self.db.table("self_tests").insert(
            {"run_id": run_id, "task_id": task_id, **row}, replace=True
        )

    @serialized
    def run_self_tests(self, run_id: str) -> list[dict[str, Any]]:
        rows = self.db.table("self_tests").rows_where("run_id = ?", [run_id], order_by="task_id")
        return [
            {"task_id": r["task_id"]} | {k: json.loads(r[k]) for k in ("tests", "dropped", "usage")}
            for r in rows
        ]

    # ------------------------------------------------------------ runs

    @serialized
    def start_run(self, run_id: str, manifest: dict[str, Any]) -> None:
        """The run started, by this process (its owner, until a resume takes it over)."""
        self.db.table("runs").upsert(
            {
                "id": run_id,
                "started_at": time.time(),
                "status": "running",
                "manifest": json.dumps(manifest, sort_keys=True),
                "owner": json.dumps(this_process()),
            },
            pk="id",
        )

    @serialized
    def resume_run(self, run_id: str) -> None:
        """The run running again, this process its owner (its manifest as it started)."""
        owner = json.dumps(this_process())
        self.db.table("runs").update(
            run_id, {"status": "running", "ended_at": None, "owner": owner}
        )

    @serialized
    def end_run(self, run_id: str, status: str = "finished") -> None:
        self.db.table("runs").update(run_id, {"ended_at": time.time(), "status": status})

    @serialized
    def run(self, run_id: str) -> dict[str, Any] | None:
        found = next(iter(self.db.table("runs").rows_where("id = ?", [run_id])), None)
        return as_now(found) if found else None

    @serialized
    def runs(self) -> list[dict[str, Any]]:
        return [as_now(run) for run in self.db.table("runs").rows_where(order_by="started_at")]

    # ------------------------------------------------------------ episodes and attempts

    @serialized
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

    @serialized
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

    @serialized
    def log_attempt(self, episode: Episode, attempt: Attempt, verdict: Verdict) -> None:
        """The attempt as it is now (its charges included), in one transaction."""
        with self._immediate():
            self._upsert_attempt(episode, attempt, verdict)

    def _upsert_attempt(self, episode: Episode, attempt: Attempt, verdict: Verdict) -> None:
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

    @serialized
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

    @serialized
    def is_finished(self, episode_id: str) -> bool:
        rows = list(self.db.table("episodes").rows_where("id = ?", [episode_id]))
        return bool(rows and rows[0]["ended_at"])

    @serialized
    def episode(self, episode_id: str) -> Episode | None:
        row = next(self.db.table("episodes").rows_where("id = ?", [episode_id]), None)
        if row is None:
            return None
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

    @serialized
    def episodes(self, run_id: str | None = None) -> list[dict[str, Any]]:
        where, args = ("run_id = ?", [run_id]) if run_id else (None, [])
        rows = self.db.table("episodes").rows_where(where, args, order_by="position, started_at")
        return list(rows)

    @serialized
    def unfinished_steps(self, episode_id: str, trial: int) -> list[Step]:
        """Steps logged for an attempt that never finished, repaired for sending again."""
        rows = self.db.table("steps").rows_where(
            "attempt_id = ?", [f"{episode_id}:{trial}"], order_by="idx"
        )
        return [Step.model_validate_json(r["record"]).closed() for r in rows]

    # ------------------------------------------------------------ reflections

    @serialized
    def reflection_pending(self, episode_id: str, trial: int) -> bool:
        query = "select reflection from attempts where id = ?"
        row = self.db.conn.execute(query, [f"{episode_id}:{trial}"]).fetchone()
        return bool(row and row[0] == "pending")

    @serialized
    def reflection_done(self, episode_id: str, trial: int, lessons_written: list[str]) -> None:
        """The reflection on this attempt is made: what it wrote, and that it is done."""
        with self._immediate() as conn:
            _reflected(conn, episode_id, trial, lessons_written)

    @serialized
    def log_reply(self, episode: Episode, attempt: Attempt, verdict: Verdict, written: str) -> None:
        """What is to be kept after this attempt (the reflector's reply as memory/written.py
        holds it), with the attempt charged for it, in one transaction: from here on a resume
        finishes what the reply says and asks for nothing again."""
        with self._immediate():
            self._upsert_attempt(episode, attempt, verdict)
            self.db.table("reflection_replies").upsert(
                {"attempt_id": f"{episode.id}:{attempt.trial}", "written": written,
                 "logged_at": time.time()},
                pk="attempt_id",
            )  # fmt: skip

    @serialized
    def reply(self, episode_id: str, trial: int) -> str | None:
        """What `log_reply` logged for this attempt (None: nothing)."""
        query = "select written from reflection_replies where attempt_id = ?"
        row = self.db.conn.execute(query, [f"{episode_id}:{trial}"]).fetchone()
        return row[0] if row else None

    @serialized
    def keep_written(
        self, changes: list[LessonChanges], episode_id: str, trial: int, lessons_written: list[str]
    ) -> list[list[Lesson]]:
        """Every change to lessons a reply makes, what the episode wrote so far and that the
        reflection on this attempt is done: one transaction. Returns each change's lessons as
        they now are."""
        with self._immediate() as conn:
            result = [self._changed(conn, each) for each in changes]
            _reflected(conn, episode_id, trial, lessons_written)
        return result


def _reflected(
    conn: sqlite3.Connection, episode_id: str, trial: int, lessons_written: list[str]
) -> None:
    """What the episode wrote so far, and that the reflection on this attempt is done."""
    conn.execute(
        "update episodes set lessons_written = ? where id = ?",
        [json.dumps(lessons_written), episode_id],
    )
    conn.execute("update attempts set reflection = 'done' where id = ?", [f"{episode_id}:{trial}"])


def as_now(run: dict[str, Any]) -> dict[str, Any]:
    """A run's row as things are: one still marked running whose process (its `owner`, the
    one that started or last resumed it; none in runs logged before it was recorded) has
    ended was killed, and reads interrupted."""
    owner = run_owner(run) if run["status"] == "running" else None
    return {**run, "status": "interrupted"} if owner and gone(owner) else run


def run_owner(run: dict[str, Any]) -> dict[str, Any] | None:
    """The process a run's row names as working on it (`this_process`'s description), or
    None: none recorded, or one the log holds garbled (a hint about liveness, not a record
    the run needs, so it is read as naming none)."""
    try:
        owner = json.loads(run.get("owner") or "null")
    except ValueError:
        return None
    return owner if isinstance(owner, dict) else None
