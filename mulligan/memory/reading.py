"""A memory opened only to read it (`mulligan view`): the episode log through `EpisodeLog`
opened read-only (SQLite's `mode=ro`), so that nothing here can write to it, create it or
migrate it.

Lessons are read from the log's own lesson table, which holds every lesson's whole record
and current validity (the lesson store's metadata are a cache of it), so reading never
opens chromadb, which would write to its directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mulligan.errors import UserError
from mulligan.memory.log import EpisodeLog
from mulligan.memory.migrations import MIGRATIONS, refuse_newer
from mulligan.schema import Lesson, Verdict

HOW_TO_FIX = "pass the --memory directory a run or a study made (bench: OUT/memory)"


@dataclass(frozen=True)
class RunRow:
    """One run as the list of runs shows it."""

    id: str
    started_at: float
    ended_at: float | None
    status: str
    manifest: dict[str, Any]
    episodes: int


@dataclass(frozen=True)
class LessonUse:
    """One event in a lesson's history, and the attempt it happened at (if any)."""

    event: str
    episode_id: str
    trial: int
    detail: str
    at: float
    verdict: Verdict | None
    """The hidden verdict of the attempt at that episode and trial, when it was logged."""
    task_id: str


class OlderLog(UserError):
    """The episode log lacks a migration (`missing`): an older mulligan wrote it, and a
    command that only reads leaves it as it is."""

    def __init__(self, where: str, missing: str) -> None:
        super().__init__(f"{where}: the episode log was written by an older mulligan (it "
                         f"lacks migration {missing}), and a command that only reads leaves it "
                         "as it is; `mulligan memory upgrade` (or the next run, bench or "
                         "solve with this --memory) brings it up to date")  # fmt: skip
        self.where, self.missing = where, missing


class MemoryReader:
    """The episode log of a memory directory, read-only; `where` names it in errors (the flag
    that gave it: --memory unless told)."""

    def __init__(self, directory: str | Path, where: str = "") -> None:
        self.directory = Path(directory).expanduser()
        where = where or f"--memory {directory}"
        path = self.directory / "episodes.db"
        if not path.is_file():
            raise UserError(f"{where}: no episode log (episodes.db); {HOW_TO_FIX}")
        self.log = EpisodeLog(path, read_only=True)
        if not self._query("select name from sqlite_master where name = 'migrations'"):
            raise UserError(f"{where}: the episode log is empty (episodes.db holds no tables); "
                            f"{HOW_TO_FIX}")  # fmt: skip
        done = {r["name"] for r in self._query("select name from migrations")}
        refuse_newer(done, where)
        missing = [name for name, _ in MIGRATIONS if name not in done]
        if missing:
            raise OlderLog(where, missing[0])

    def _query(self, sql: str, args: list[Any] | tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self.log._lock:
            cursor = self.log.db.conn.execute(sql, args)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    # ------------------------------------------------------------ runs and episodes

    def runs(self) -> list[RunRow]:
        """Newest first."""
        counts = {r["run_id"]: r["n"] for r in self._query(
            "select run_id, count(*) as n from episodes group by run_id")}  # fmt: skip
        found = [
            RunRow(
                id=r["id"],
                started_at=r["started_at"] or 0.0,
                ended_at=r["ended_at"],
                status=r["status"] or "",
                manifest=json.loads(r["manifest"] or "{}"),
                episodes=counts.get(r["id"], 0),
            )
            for r in self.log.runs()
        ]
        return sorted(found, key=lambda r: r.started_at, reverse=True)

    def run(self, run_id: str) -> RunRow:
        found = next((r for r in self.runs() if r.id == run_id), None)
        if found is None:
            raise UserError(f"no run {run_id!r} in {self.directory}; `mulligan view` lists them")
        return found

    def signature(self, run_id: str) -> tuple[Any, ...]:
        """Changes whenever the run logs an attempt, ends an episode or ends (a run still
        going): what a cached grid is checked against."""
        query = (
            "select count(*) as n, max(a.finished_at) as last,"
            " (select count(*) from episodes where run_id = ? and ended_at is not null) as ended"
            " from attempts a join episodes e on a.episode_id = e.id where e.run_id = ?"
        )
        row = self._query(query, [run_id, run_id])[0]
        run = self.log.run(run_id)
        return row["n"], row["last"], row["ended"], run and run["status"]

    def verdict(self, episode_id: str, trial: int) -> Verdict | None:
        rows = self._query("select verdict from attempts where id = ?", [f"{episode_id}:{trial}"])
        return Verdict.model_validate_json(rows[0]["verdict"]) if rows else None

    # ------------------------------------------------------------ lessons

    def lesson(self, lesson_id: str) -> Lesson | None:
        found = self.log.lessons([lesson_id])
        return found[0] if found else None

    def stored_lessons(self) -> list[Lesson]:
        """Every lesson kept in the lesson store, as the log has it now, oldest first."""
        rows = self._query("select record from lessons where stored = 1")
        found = [Lesson.model_validate_json(row["record"]) for row in rows]
        return sorted(found, key=lambda lesson: (lesson.source.created_at, lesson.id))

    def lesson_uses(self, lesson_id: str) -> list[LessonUse]:
        """The lesson's events in order, each with the verdict of the attempt it concerns."""
        tasks: dict[str, str] = {}
        uses = []
        for e in self.log.lesson_events(lesson_id):
            episode_id, trial = e["episode_id"] or "", int(e["trial"] or 0)
            if episode_id and episode_id not in tasks:
                rows = self._query("select task_id from episodes where id = ?", [episode_id])
                tasks[episode_id] = rows[0]["task_id"] if rows else ""
            verdict = self.verdict(episode_id, trial) if episode_id and trial else None
            uses.append(LessonUse(e["event"], episode_id, trial, e["detail"] or "", e["at"] or 0.0,
                                  verdict, tasks.get(episode_id, "")))  # fmt: skip
        return uses

    def lesson_ids_of_run(self, run_id: str) -> list[str]:
        """Every lesson the run's episodes were shown or wrote, or that has an event in it."""
        ids: list[str] = []
        for row in self._query(
            "select a.lesson_ids from attempts a join episodes e on a.episode_id = e.id"
            " where e.run_id = ?",
            [run_id],
        ):
            ids += json.loads(row["lesson_ids"] or "[]")
        for row in self.log.episodes(run_id):
            ids += json.loads(row["lessons_written"] or "[]")
        query = (
            "select distinct l.lesson_id from lesson_events l join episodes e"
            " on l.episode_id = e.id where e.run_id = ?"
        )
        ids += [r["lesson_id"] for r in self._query(query, [run_id])]
        return list(dict.fromkeys(ids))
