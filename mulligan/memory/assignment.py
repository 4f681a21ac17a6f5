"""Verification while working: a candidate lesson tried on attempts a run makes anyway.

When a strategy that keeps the store makes a later attempt (trial 2 on) at a task that a
candidate lesson is retrieved for, the attempt is assigned to be shown the candidate or not.
Everything else the attempt sees (the validated lessons, the carried answer, feedback and
diagnoses) is fixed before the assignment, so an attempt with the candidate and one without
it differ only in the candidate.

The assignment is made per lesson and trial position, in blocks of two: the first attempt of
a block gets a seeded coin (a hash of the lesson, the position and the block's number), the
next attempt at that position gets the other arm. Each attempt's arm is thus independent of
its own context and outcome, and the two arms come in equal numbers at every position.

A judged attempt is one half of a pair. A half pairs with the oldest unpaired half of the
other arm at the same trial position (another task's): the pair **helped** when only the
half with the lesson passed its feedback-visible checks, **hurt** when only the one without
did. Across tasks, the two halves are independent draws at the same position, which is the
model `validity.by_chance` computes. An episode that stops at a pass leaves nothing
unfinished: each half is whole once its own attempt is judged. The pair goes into the
lesson's `validity.evidence` and the status is settled under the existing rule, in the same
transaction that records the half (mulligan/memory/memory.py `record_outcome`), so a crash
loses no evidence and counts none twice.

This module holds the log's `assignments` table (migration 005): `AssignmentLog`, whose
methods the episode log takes, so that a run's workers reach them as they reach the log's
others (a Ray worker forwards each call by name to the driver's log); and
`InWorkVerification`, what `Memory` asks of them."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from mulligan.memory.lesson_log import LessonLog
from mulligan.memory.validity import (
    GENERAL,
    ValiditySection,
    apply_evidence,
    by_chance_while_working,
    settle,
)
from mulligan.schema import Lesson, Task

COLUMNS = "episode_id, trial, lesson_id, task_id, shown, coin, passed, told, pair"


@dataclass(frozen=True)
class Assignment:
    """One attempt assigned to be shown a candidate (`shown`) or not."""

    episode_id: str
    trial: int
    lesson_id: str
    task_id: str
    shown: bool
    coin: str
    """How the arm was decided: the block's coin, or the other half of a block."""
    passed: bool | None = None
    """What the attempt's feedback-visible checks said (None: not judged, or told nothing)."""
    told: bool | None = None
    """None until judged; False: the attempt told nothing (it makes no half)."""
    pair: int | None = None
    """The lesson's pair this half belongs to, once paired."""

    @property
    def arm(self) -> str:
        return "shown" if self.shown else "withheld"

    @property
    def outcome(self) -> str:
        if self.told is None:
            return "not judged yet"
        if not self.told:
            return "told nothing"
        return "passed" if self.passed else "failed"


def _assignment(row: tuple[Any, ...]) -> Assignment:
    episode_id, trial, lesson_id, task_id, shown, coin, passed, told, pair = row
    return Assignment(
        episode_id, trial, lesson_id, task_id, bool(shown), coin,
        None if passed is None else bool(passed), None if told is None else bool(told), pair,
    )  # fmt: skip


def heads(lesson_id: str, trial: int, block: int) -> bool:
    """The seeded coin of one block: shown first, or withheld first."""
    digest = hashlib.sha256(f"{lesson_id}:{trial}:{block}".encode()).digest()
    return digest[0] % 2 == 1


def assign(
    conn: sqlite3.Connection, episode_id: str, trial: int, task_id: str, lesson_id: str
) -> Assignment:
    """The attempt's assignment: the one logged already (a resumed attempt keeps its arm),
    else the next of the lesson's block at this position. Run inside a write transaction."""
    found = at(conn, episode_id, trial)
    if found:
        return found
    query = "select count(*) from assignments where lesson_id = ? and trial = ?"
    made = conn.execute(query, [lesson_id, trial]).fetchone()[0]
    block, second = divmod(made, 2)  # the second of a block takes the arm its first did not
    shown = heads(lesson_id, trial, block) != bool(second)
    coin = f"{'other half' if second else 'coin'} of block {block + 1}"
    conn.execute(
        "insert into assignments (episode_id, trial, lesson_id, task_id, shown, coin,"
        " assigned_at) values (?, ?, ?, ?, ?, ?, ?)",
        [episode_id, trial, lesson_id, task_id, int(shown), coin, time.time()],
    )
    return Assignment(episode_id, trial, lesson_id, task_id, shown, coin)


def judge(
    conn: sqlite3.Connection,
    lesson: Lesson,
    episode_id: str,
    trial: int,
    passed: bool | None,
    rules: ValiditySection,
) -> list[str]:
    """Record the attempt's outcome on its half, pair it with the oldest unpaired half of
    the other arm at the same position, and add the pair to `lesson`'s evidence (changed in
    place; its status settled). A lesson no longer a candidate (settled while the attempt
    ran) makes no pair. Returns the events that caused. Run inside the write transaction
    that saves `lesson`."""
    mine = at(conn, episode_id, trial)
    if mine is None or mine.told is not None:
        return []
    where = [episode_id, trial]
    if passed is None:
        conn.execute("update assignments set told = 0 where episode_id = ? and trial = ?", where)
        return []
    conn.execute(
        "update assignments set told = 1, passed = ? where episode_id = ? and trial = ?",
        [int(passed), *where],
    )
    if lesson.validity.status != "candidate":
        return []  # settled (elsewhere, while the attempt ran): it makes no more pairs
    mine = replace(mine, told=True, passed=passed)
    query = (
        f"select {COLUMNS} from assignments where lesson_id = ? and trial = ? and shown = ?"
        " and told = 1 and pair is null order by rowid limit 1"
    )
    row = conn.execute(query, [mine.lesson_id, trial, int(not mine.shown)]).fetchone()
    if row is None:
        return []
    other = _assignment(row)
    query = "select coalesce(max(pair), 0) + 1 from assignments where lesson_id = ?"
    number = conn.execute(query, [mine.lesson_id]).fetchone()[0]
    for half in (mine, other):
        conn.execute(
            "update assignments set pair = ? where episode_id = ? and trial = ?",
            [number, half.episode_id, half.trial],
        )
    with_, without = (mine, other) if mine.shown else (other, mine)
    helped = bool(with_.passed) and not without.passed
    hurt = bool(without.passed) and not with_.passed
    apply_evidence(lesson, with_.task_id, helped, hurt)
    status = settle(lesson, rules)
    return ["verified"] + ([f"status:{status}"] if status else [])


def at(conn: sqlite3.Connection, episode_id: str, trial: int) -> Assignment | None:
    found = _rows(conn, "episode_id = ? and trial = ?", [episode_id, trial])
    return found[0] if found else None


class AssignmentLog(LessonLog):
    """The `assignments` table, as methods of the episode log (`EpisodeLog` takes them):
    each write is one transaction with the lesson's change and its events."""

    def assign_attempt(
        self, episode_id: str, trial: int, task_id: str, lesson: Lesson
    ) -> tuple[Assignment, list[Lesson]]:
        """The attempt's assignment to `lesson` (the one logged already, for a resumed
        attempt), logged as the lesson's `assigned` event, and `shown` when it is shown (its
        online count of times shown); returns it, and the lesson as the log now has it."""
        made: list[Assignment] = []

        def take(fresh: Lesson) -> list[str]:
            made.append(assign(self.db.conn, episode_id, trial, task_id, fresh.id))
            fresh.validity.retrieved += made[-1].shown
            return ["shown"] if made[-1].shown else []

        with self._lock:
            now = self.change_lessons(
                [lesson], "assigned", take, episode_id=episode_id, trial=trial, once=True
            )
            found = made[0] if made else at(self.db.conn, episode_id, trial)
        if found is None:
            raise RuntimeError(f"no assignment logged for {episode_id} trial {trial}")
        return found, now

    def judge_attempt(
        self, episode_id: str, trial: int, passed: bool | None, rules: ValiditySection
    ) -> list[Lesson]:
        """The attempt's outcome on its half, and the pair it completes (`judge`), in one
        transaction with the lesson's evidence and events; once however often a resumed run
        gets here. Returns the lessons changed ([]: no assignment, or judged before)."""
        with self._lock:
            found = at(self.db.conn, episode_id, trial)
            if found is None or found.told is not None:
                return []
            lesson = self.lessons([found.lesson_id])
            outcome = "told nothing" if passed is None else "passed" if passed else "failed"

            def record(fresh: Lesson) -> list[str]:
                return judge(self.db.conn, fresh, episode_id, trial, passed, rules)

            return self.change_lessons(
                lesson, "judged", record, episode_id=episode_id, trial=trial, once=True,
                details=[f"{found.task_id}: {found.arm}, {outcome}"],
            )  # fmt: skip

    def assignment_at(self, episode_id: str, trial: int) -> Assignment | None:
        with self._lock:
            return at(self.db.conn, episode_id, trial)

    def assignments_of_episode(self, episode_id: str) -> dict[int, Assignment]:
        """The episode's assignments by trial."""
        with self._lock:
            return {a.trial: a for a in _rows(self.db.conn, "episode_id = ?", [episode_id])}

    def assignments_of_lesson(self, lesson_id: str) -> list[Assignment]:
        """Every attempt assigned for the lesson, in the order they were assigned."""
        with self._lock:
            return _rows(self.db.conn, "lesson_id = ?", [lesson_id])

    def withheld_halves(self, lesson_ids: list[str] | None = None) -> tuple[int, int]:
        """Of the judged attempts that were not shown their candidate (of these lessons, or
        of any), how many passed their visible checks, and how many told something: the
        pass rate without the lesson that chance is measured against."""
        where, args = "shown = 0 and told = 1", []
        if lesson_ids is not None:
            where += f" and lesson_id in ({','.join('?' for _ in lesson_ids)})"
            args = list(lesson_ids)
        with self._lock:
            halves = _rows(self.db.conn, where, args)
        return sum(bool(h.passed) for h in halves), len(halves)


def _rows(conn: sqlite3.Connection, where: str, args: list[Any]) -> list[Assignment]:
    """Read-only: a log written before this table existed (opened read-only) has none."""
    query = "select 1 from sqlite_master where type = 'table' and name = 'assignments'"
    if conn.execute(query).fetchone() is None:
        return []
    query = f"select {COLUMNS} from assignments where {where} order by rowid"
    return [_assignment(row) for row in conn.execute(query, args)]


Search = Callable[[Task, int, set[str], float], list[Lesson]]
"""The top-k active lessons for a task (what `--show-candidates` would show), skipping ids."""
Recache = Callable[[list[Lesson]], None]
"""Refresh the lesson store's cached copy of lessons the log changed."""


class InWorkVerification:
    """Which candidate a later attempt is assigned, and what its outcome adds to the evidence
    (`Memory.recall`, `Memory.record_outcome`), all through the log's methods: a Ray worker's
    memory, whose log forwards each call to the driver, verifies as a thread's does."""

    def __init__(self, episodes: AssignmentLog, search: Search, recache: Recache) -> None:
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
        if not now or now[0].id in exclude:
            return []
        if now[0].validity.status == "validated":  # settled since its arm was drawn (a
            return now[:1]  # resumed attempt, or another process): shown to every attempt
        if not found.shown or now[0].validity.status != "candidate":
            return []  # withheld; or refuted or retracted since: never shown again
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
        if earlier:
            latest = earlier[trial if trial in earlier else max(earlier)]
            lesson = next(iter(self.episodes.lessons([latest.lesson_id])), None)
            usable = lesson and lesson.validity.status == "candidate" and lesson.id not in exclude
            if trial in earlier or usable:
                return lesson
        ranked = [
            lesson
            for lesson in self.search(task, k, exclude, floor)
            if lesson.validity.status == "candidate" and lesson.kind in GENERAL
            if lesson.source.episode_id != episode_id
        ]
        return min(ranked, key=lambda x: x.validity.evidence.pairs) if ranked else None


def summary(assigned: list[Assignment]) -> str:
    """How often the lesson was tried while working, in words."""
    if not assigned:
        return "never assigned while working"
    with_ = [a for a in assigned if a.shown and a.told]
    without = [a for a in assigned if not a.shown and a.told]
    pairs = pairs_made(assigned)
    return (
        f"assigned to {len(assigned)} later attempt(s) while working: shown to "
        f"{len(with_)} judged (passed {sum(bool(a.passed) for a in with_)}), withheld from "
        f"{len(without)} (passed {sum(bool(a.passed) for a in without)}); {pairs} pair(s)"
    )


def pairs_made(assigned: list[Assignment]) -> int:
    """How many pairs a lesson's assignments made while working (both halves carry one)."""
    return len({a.pair for a in assigned if a.pair})


def line(a: Assignment) -> str:
    pair = f", pair {a.pair}" if a.pair else ""
    return f"{a.episode_id} trial {a.trial} ({a.task_id}): {a.arm}, {a.outcome}{pair} ({a.coin})"


def chance_line(
    assigned: list[Assignment], without: tuple[int, int], rules: ValiditySection
) -> str | None:
    """What noise alone does to a lesson that changes nothing, settled pair by pair as here,
    over the pairs its assignments (`assigned`) made while working (a batch verification's
    are not counted: settled otherwise), at the pass rate the withheld attempts had (None: no
    such pair, or no withheld attempt told)."""
    pairs, (passed, told) = pairs_made(assigned), without
    if not pairs or not told:
        return None
    luck = by_chance_while_working(pairs, passed / told, rules)
    return (
        f"by chance alone (a lesson that changes nothing, at the {luck.pass_rate:.0%} pass "
        f"rate of the attempts a candidate was withheld from): validated by its pair {pairs} "
        f"{luck.validated:.0%} of the time, refuted {luck.refuted:.0%}"
    )
