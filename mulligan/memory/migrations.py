"""The episode log's schema: an append-only list of migrations, applied in order by
`EpisodeLog` (mulligan/memory/log.py, the only module that imports sqlite-utils; this one
only receives its database)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from mulligan.errors import UserError

if TYPE_CHECKING:
    import sqlite_utils


def migrate(db: sqlite_utils.Database, where: str) -> list[str]:
    """Apply the migrations the log lacks, in order, in one transaction (a log opened to
    write; one opened to read is never migrated); the names of those applied."""
    with db.conn:
        db.conn.execute("BEGIN IMMEDIATE")
        if "migrations" not in db.table_names():
            db.table("migrations").create({"name": str, "applied_at": float}, pk="name")
        done = {row["name"] for row in db.table("migrations").rows}
        refuse_newer(done, where)
        applied = [name for name, _ in MIGRATIONS if name not in done]
        for name, change in MIGRATIONS:
            if name in applied:
                change(db)
                db.table("migrations").insert({"name": name, "applied_at": time.time()})
    return applied


def refuse_newer(done: set[str], where: str) -> None:
    """A log whose migrations (`done`) include one this mulligan lacks: its records may hold
    what this version cannot read, so it is neither read nor written."""
    unknown = sorted(done - {name for name, _ in MIGRATIONS})
    if unknown:
        raise UserError(f"{where}: the episode log was written by a newer mulligan (it has "
                        f"migration {unknown[0]}, which this one lacks); upgrade mulligan to "
                        "read or write it")  # fmt: skip


def _m001_initial(db: sqlite_utils.Database) -> None:
    db.table("runs").create(
        {"id": str, "started_at": float, "ended_at": float, "status": str, "manifest": str},
        pk="id",
    )
    db.table("episodes").create(
        {
            "id": str,
            "run_id": str,
            "task_id": str,
            "strategy": str,
            "position": int,
            "started_at": float,
            "ended_at": float,
            "passed": int,
            "trials": int,
            "lessons_written": str,
        },
        pk="id",
    )
    db.table("attempts").create(
        {
            "id": str,
            "episode_id": str,
            "trial": int,
            "stop_reason": str,
            "answer": str,
            "passed": int,
            "score": float,
            "steps": int,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost": float,
            "seconds": float,
            "lesson_ids": str,
            "record": str,
            "verdict": str,
            "finished_at": float,
        },
        pk="id",
    )
    db.table("steps").create(
        {"attempt_id": str, "idx": int, "kind": str, "record": str, "logged_at": float},
        pk=("attempt_id", "idx"),
    )
    db.table("lessons").create(
        {"id": str, "text": str, "kind": str, "status": str, "record": str, "updated_at": float},
        pk="id",
    )
    db.table("lesson_events").create(
        {
            "id": int,
            "lesson_id": str,
            "event": str,
            "episode_id": str,
            "trial": int,
            "detail": str,
            "at": float,
        },
        pk="id",
    )
    db.table("attempts").create_index(["episode_id"])
    db.table("episodes").create_index(["run_id"])
    db.table("lesson_events").create_index(["lesson_id"])


def _m002_reflection_state_and_stored_lessons(db: sqlite_utils.Database) -> None:
    # an attempt is logged with its reflection pending; a resume redoes one still pending
    db.table("attempts").add_column("reflection", str, not_null_default="pending")
    # the lesson is also in the lesson store (whose metadata is a cache of this table)
    db.table("lessons").add_column("stored", int, not_null_default=0)


def _m003_attempt_usage_by_role(db: sqlite_utils.Database) -> None:
    """Usage per role (actor, summariser, reflector, judge) as JSON; the token and cost
    columns hold the sum over every role from here on (before: the actor's and summariser's)."""
    db.table("attempts").add_column("usage_by_role", str)


def _m004_self_tests(db: sqlite_utils.Database) -> None:
    """The asserts a model wrote for a task before its first attempt (`--self-tests`), once
    per run and task, so that every strategy of a study checks against the same ones."""
    db.table("self_tests").create(
        {"run_id": str, "task_id": str, "tests": str, "dropped": str, "usage": str},
        pk=("run_id", "task_id"),
    )


def _m005_assignments(db: sqlite_utils.Database) -> None:
    """Verification while working (mulligan/memory/assignment.py): one row per attempt
    assigned to be shown a candidate lesson or not; its visible outcome once judged (`told`
    0: the attempt told nothing), and the number of the pair it completed, per lesson."""
    db.table("assignments").create(
        {
            "episode_id": str,
            "trial": int,
            "lesson_id": str,
            "task_id": str,
            "shown": int,
            "coin": str,
            "assigned_at": float,
            "passed": int,
            "told": int,
            "pair": int,
        },
        pk=("episode_id", "trial"),
    )
    db.table("assignments").create_index(["lesson_id", "trial", "shown"])


def _m006_attempt_provenance(db: sqlite_utils.Database) -> None:
    """What produced an attempt, as JSON lists: the sampling seed each of its model calls was
    sent with, and the endpoint's `system_fingerprint`s on the replies (empty where the
    endpoint takes no seed or sends no fingerprint, and for attempts logged before)."""
    db.table("attempts").add_column("seeds", str, not_null_default="[]")
    db.table("attempts").add_column("fingerprints", str, not_null_default="[]")


def _m007_reflection_replies(db: sqlite_utils.Database) -> None:
    """What is to be kept after an attempt (the reflector's reply: its lessons, the case,
    what they supersede), logged before any of it is kept, so that a resume after a kill
    finishes it instead of asking again or keeping part of it."""
    db.table("reflection_replies").create(
        {"attempt_id": str, "written": str, "logged_at": float}, pk="attempt_id"
    )


def _m008_run_owner(db: sqlite_utils.Database) -> None:
    """The process working on a run (JSON: host, pid, start time; sandbox/processes.py
    `this_process`): the one that started it, or the last to resume it. A run still marked
    running whose process has ended was killed (kill -9), and reads interrupted. Runs logged
    before name none, and read as logged."""
    db.table("runs").add_column("owner", str)


MIGRATIONS: list[tuple[str, Callable[[sqlite_utils.Database], None]]] = [
    ("001_initial", _m001_initial),
    ("002_reflection_state_and_stored_lessons", _m002_reflection_state_and_stored_lessons),
    ("003_attempt_usage_by_role", _m003_attempt_usage_by_role),
    ("004_self_tests", _m004_self_tests),
    ("005_assignments", _m005_assignments),
    ("006_attempt_provenance", _m006_attempt_provenance),
    ("007_reflection_replies", _m007_reflection_replies),
    ("008_run_owner", _m008_run_owner),
]
"""Append only: never edit or reorder an entry that has shipped."""
