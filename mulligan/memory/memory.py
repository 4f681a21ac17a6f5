"""Memory: the episode log and the lesson store behind one small interface for the loop."""

from __future__ import annotations

import functools
import json
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mulligan.errors import UserError
from mulligan.inputs.memory_files import is_server
from mulligan.memory.assignment import Assignment, InWorkVerification
from mulligan.memory.embeddings import Embedder, HashEmbedding
from mulligan.memory.lesson_log import reinforced, to_status, unchanged
from mulligan.memory.log import EpisodeLog, LessonChange
from mulligan.memory.twins import stand_ins
from mulligan.memory.validity import ACTIVE, VALIDATED, ValiditySection, apply_outcome
from mulligan.memory.written import KeepsWritten
from mulligan.schema import Attempt, Episode, Lesson, LessonValidity, Task, Verdict, tells_nothing

if TYPE_CHECKING:
    from mulligan.memory.store import LessonStore  # chromadb loads when a store opens


class Memory(KeepsWritten):
    """`directory` holds episodes.db (and the embedded lesson store unless `store` is a URL).

    `embedder` may be a factory called when the store first opens; a factory that returns
    None opens the store without one (reading and metadata updates only)."""

    def __init__(
        self,
        directory: str | Path,
        embedder: Callable[[], Embedder | None] | Embedder | None = None,
        *,
        store: str | None = None,
        rules: ValiditySection | None = None,
        log: EpisodeLog | None = None,
    ) -> None:
        self.directory = Path(directory).expanduser()
        self.log = log if log is not None else EpisodeLog(self.directory / "episodes.db")
        """`log` stands in for the directory's own (a Ray worker's, forwarding to the driver)."""
        self.rules = rules or ValiditySection()
        self._store_location = store or str(self.directory / "lessons")
        self._embedder = embedder
        self._store: LessonStore | None = None
        self._opening = threading.Lock()
        self._stored_ids: set[str] = set()
        """Lessons known to be in the store (kept persistently or retrieved from it)."""
        self.frozen = False
        """The store stays as it is (see `freeze`)."""
        self.in_work = InWorkVerification(self.log, self._active, self._recache)

    @property
    def where(self) -> str:
        """The lesson store as a person would name it: its URL, or the memory directory."""
        return self._store_location if is_server(self._store_location) else str(self.directory)

    @property
    def store(self) -> LessonStore:
        """Opened on first use: runs that never touch the store need no embedding model."""
        with self._opening:  # once, whichever of a run's threads comes first
            if self._store is None:
                if self._embedder is None:
                    self._embedder = HashEmbedding()
                from mulligan.memory.store import LessonStore

                embedder = self._embedder() if callable(self._embedder) else self._embedder
                self._store = LessonStore(self._store_location, embedder)
            return self._store

    def freeze(self) -> None:
        """From now on the store stays as it is (a transfer study's test phase): its lessons'
        uses (`retrieved`, `helped`, `hurt`) are logged as events, but their counters and
        status do not change, nothing supersedes them and no lesson is stored."""
        self.frozen = True

    # ------------------------------------------------------------ episodes

    def start_episode(self, episode: Episode, position: int = 0) -> None:
        self.log.start_episode(episode, position)

    def resume_episode(self, episode_id: str) -> Episode | None:
        """An episode from the log to go on with: help or harm a crash left uncounted is
        counted, the store's copies of the lessons it touched made the log's again."""
        episode = self.log.episode(episode_id)
        if episode and not self.frozen:  # a crash may have come between a change and its copy
            self._recache(self.log.lessons(self.log.lessons_touched(episode_id)))
        if episode and episode.attempts:
            attempt, verdict = episode.attempts[-1], episode.verdicts[-1]
            given = self.lessons(attempt.lesson_ids)
            self.record_outcome(episode.id, attempt.trial, told(attempt, verdict), given)
        return episode

    def finish_attempt(
        self, episode: Episode, attempt: Attempt, verdict: Verdict, given: list[Lesson]
    ) -> None:
        """Log the attempt, then record its outcome (`record_outcome`)."""
        self.log.log_attempt(episode, attempt, verdict)
        self.record_outcome(episode.id, attempt.trial, told(attempt, verdict), given)

    def record_outcome(
        self, episode_id: str, trial: int, passed: bool | None, shown: list[Lesson]
    ) -> None:
        """What an attempt's feedback-visible checks said (None: it told nothing), as
        evidence: `helped` or `hurt` counted online on every lesson it was shown, and its
        assignment's half of a pair (mulligan/memory/assignment.py). Once per attempt,
        however often a resumed run gets here; the hidden checks decide nothing."""
        if passed is not None:
            count = functools.partial(apply_outcome, passed=passed)
            self.change(shown, "helped" if passed else "hurt", count,
                        episode_id=episode_id, trial=trial, once=bool(episode_id))  # fmt: skip
        if not self.frozen:  # (a frozen store's lessons keep their evidence as it is)
            self.in_work.judged(episode_id, trial, passed, self.rules)

    def log_charges(self, episode: Episode) -> None:
        """Log the last attempt again, now charged with the calls made after it."""
        if episode.attempts:
            self.log.log_attempt(episode, episode.attempts[-1], episode.verdicts[-1])

    def finish_episode(self, episode: Episode) -> None:
        self.log.end_episode(episode)

    # ------------------------------------------------------------ lessons
    #
    # The log is the source of truth for counters and status: every change is one
    # transaction there (`change_lessons`), then the store's metadata, a cache for
    # filtering, is rewritten from it without re-embedding.

    def keep(self, lesson: Lesson, *, persistent: bool) -> Lesson:
        """Record a new lesson; with `persistent`, also in the store (or strengthen its twin)."""
        if self.rules.ttl_days and lesson.validity.expires_at is None:
            lesson.validity.expires_at = lesson.source.created_at + self.rules.ttl_days * 86400
        kept, new = lesson, True
        if persistent:
            if self.frozen:
                raise RuntimeError(f"the lesson store is frozen: lesson {lesson.id} not stored")
            kept, new = self.store.add_or_strengthen(lesson)
            self._stored_ids.add(kept.id)
        episode_id, trial = lesson.source.episode_id, lesson.source.trial
        if new:
            return self.log.change_lessons([kept], "created", unchanged, episode_id=episode_id,
                                           trial=trial, stored=persistent)[0]  # fmt: skip
        return self.change([kept], "reinforced", reinforced, episode_id=episode_id, trial=trial,
                           stored=persistent)[0]  # fmt: skip

    def retrieve(
        self,
        task: Task,
        k: int,
        exclude: set[str] | None = None,
        episode_id: str = "",
        trial: int = 0,
        *,
        min_similarity: float = 0.0,
        candidates: bool = True,
        cases: int = 0,
        shuffled: bool = False,
    ) -> list[Lesson]:
        """The top-k usable general lessons (validated ones; with `candidates`, those not yet
        verified too), then the top `cases` cases (a case is what passed, not a rule), each
        counted `retrieved` once: a trial resumed after a crash gets what its first start
        got, and nothing is counted again. `shuffled`: another family's stand in for them
        (memory/twins.py)."""
        statuses = ACTIVE if candidates else VALIDATED
        if episode_id:
            earlier = self.log.lessons_with("retrieved", episode_id, trial)
            if earlier:
                self._stored_ids.update(earlier)
                return self.log.lessons(earlier)
        text, family, floor = task.prompt, task.family, min_similarity
        found = self.store.search(text, k, family, exclude, floor, statuses=statuses) if k else []
        if cases:
            found += self.store.search(text, cases, family, exclude, floor, kinds=("case",))
        if shuffled:
            found = stand_ins(self.store.all(), task, found)
        truth = self._as_logged([lesson for lesson, _ in found])

        def as_the_log_says(lesson: Lesson) -> bool:
            among = ACTIVE if shuffled or lesson.kind == "case" else statuses  # (searched so)
            return lesson.id not in truth or truth[lesson.id].validity.status in among

        found = [(lesson, score) for lesson, score in found if as_the_log_says(lesson)]
        self._stored_ids.update(lesson.id for lesson, _ in found)

        def count(lesson: Lesson) -> list[str]:
            lesson.validity.retrieved += 1
            return []

        return self.change(
            [lesson for lesson, _ in found], "retrieved", count,
            episode_id=episode_id, trial=trial, once=bool(episode_id), stored=True,
            details=[f"{task.id} score {score:.3f}" for _, score in found],
        )  # fmt: skip

    def recall(
        self,
        task: Task,
        episode_id: str,
        trial: int,
        *,
        k: int = 3,
        exclude: set[str] | None = None,
        min_similarity: float = 0.0,
        show_candidates: bool = False,
        verify: bool = True,
        cases: int = 0,
        shuffled: bool = False,
    ) -> list[Lesson]:
        """What attempt `trial` at `task` is shown: the top-k validated lessons (and cases:
        `retrieve`), and from trial 2 on, with `verify`, the relevant candidate when its
        assignment says so (verification while working, mulligan/memory/assignment.py).
        `show_candidates`: every active lesson instead, marked, and no assignment."""
        exclude = set(exclude or ())
        shown = self.retrieve(
            task, k, exclude, episode_id, trial, min_similarity=min_similarity,
            candidates=show_candidates, cases=cases, shuffled=shuffled,
        )  # fmt: skip
        if not verify or show_candidates or shuffled or self.frozen or not k:
            return shown
        showing = {lesson.id for lesson in shown}  # not `exclude`: a twin it wrote may be tried
        return shown + self.in_work.tried(task, episode_id, trial, showing, k, min_similarity)

    def assignment(self, episode_id: str, trial: int) -> Assignment | None:
        """Whether that attempt was assigned a candidate, and which arm."""
        return self.log.assignment_at(episode_id, trial)

    def _active(self, task: Task, k: int, exclude: set[str], floor: float) -> list[Lesson]:
        """The top-k active general lessons for the task, as the log has them now."""
        found = self.store.search(task.prompt, k, task.family, min_similarity=floor)
        truth = self._as_logged([lesson for lesson, _ in found if lesson.id not in exclude])
        return [lesson for lesson in truth.values() if lesson.validity.status in ACTIVE]

    def _as_logged(self, found: list[Lesson]) -> dict[str, Lesson]:
        """The log's record of lessons the store found, by id. A store copy whose status lags
        behind the log's (a kill between a change and its rewrite) is rewritten from it, so a
        lesson validated then is found as validated from now on."""
        truth = {lesson.id: lesson for lesson in self.log.lessons([x.id for x in found])}
        if not self.frozen:
            held = {x.id: x.validity.status for x in found}
            self._recache([x for i, x in truth.items() if x.validity.status != held[i]])
        return truth

    def supersede(self, old: Lesson, new_id: str, episode_id: str = "", trial: int = 0) -> None:
        """The reflector wrote a better lesson in place of `old`: it is no longer used."""
        for c in self._superseding(old, new_id, episode_id, trial):
            self.change(c.lessons, c.event, c.change, episode_id=c.episode_id, trial=c.trial,
                         details=c.details)  # fmt: skip

    def lessons(self, ids: list[str]) -> list[Lesson]:
        return self.log.lessons(ids)

    def retract(self, lesson_id: str) -> tuple[Lesson, bool] | None:
        """The lesson, retracted by the user, and whether this call retracted it (not: it was
        already, and nothing changed); None: no such lesson."""
        found = self.log.lessons([lesson_id]) or self.store.get([lesson_id])
        if not found or found[0].validity.status == "retracted":
            self._recache(found)  # (the store's copy, had a kill cut short its rewriting)
            return (found[0], False) if found else None
        details = ["retracted by the user"]
        change = to_status("retracted")
        return self.change(found, "status:retracted", change, details=details)[0], True

    def import_jsonl(self, lines: list[str], *, trust: bool = False, source: str = "") -> int:
        """Lessons from an export (`lines`, numbered from 1 as in `source`, the file). Unless
        trusted, each starts afresh as a candidate with its counters at zero: what counted for
        it elsewhere was never measured here. A lesson whose id is here already is refused,
        and nothing is imported: the lesson here keeps its text, scope and history. An import
        killed once the store had its lessons, the log not yet, left them in the store only:
        the same import again takes them for its own (the same text) and finishes."""
        records = [(n, json.loads(line)) for n, line in enumerate(lines, start=1) if line.strip()]
        numbered = {str(record["id"]): number for number, record in records}
        lessons = [Lesson.model_validate(record) for _, record in records]
        if not trust:  # each afresh: its counters reset
            for lesson in lessons:
                lesson.validity = LessonValidity(expires_at=lesson.validity.expires_at)
        ids, given = list(numbered), {lesson.id: lesson for lesson in lessons}
        known = self.log.known_ids(ids)
        stored_only = self.store.get([i for i in ids if i not in known])
        known |= {x.id for x in stored_only if x.text != given[x.id].text}
        if known:
            lesson_id = min(known, key=numbered.__getitem__)
            line = f"{source}:{numbered[lesson_id]}" if source else f"line {numbered[lesson_id]}"
            more = f" (and {len(known) - 1} more of these lessons)" if len(known) > 1 else ""
            raise UserError(
                f"{line}: lesson {lesson_id!r}{more} is already in {self.where}; nothing was "
                "imported: remove the lessons already here from the file, or give them new "
                "ids to keep both"
            )
        self.store.put(lessons)
        self._stored_ids.update(ids)
        detail = "kept as exported (--trust)" if trust else "reset to a candidate"
        details = [detail] * len(lessons)  # one transaction: every lesson, or none
        self.log.change_lessons(lessons, "imported", unchanged, details=details, stored=True)
        return len(lessons)

    def change(
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
        """Change lessons where their counters live (the log: one transaction), logged as
        `event`, then refresh the store's cached copy (also the curator's merges and drops).

        The callers' copies follow the log, so a loop sees a lesson refuted elsewhere.
        """
        if not lessons:
            return []
        if self.frozen:  # the event is logged, the stored lesson left as it is
            frozen, counted = self._stored([lesson.id for lesson in lessons]), change
            change = lambda lesson: [] if lesson.id in frozen else counted(lesson)  # noqa: E731
        now = self.log.change_lessons(
            lessons, event, change,
            episode_id=episode_id, trial=trial, details=details, once=once, stored=stored,
        )  # fmt: skip
        for mine, fresh in zip(lessons, now, strict=True):
            mine.validity = fresh.validity.model_copy()
        self._recache(now)
        return now


def episode_for(
    memory: Memory | None,
    episode_id: str | None,
    run_id: str,
    task_id: str,
    strategy: str,
    position: int = 0,
) -> Episode:
    """The episode of that id from the memory's log to go on with, else a new one (started in
    the log; without a memory, kept nowhere)."""
    found = memory.resume_episode(episode_id) if memory and episode_id else None
    if found:
        return found
    episode = Episode(
        id=episode_id or uuid.uuid4().hex[:12], run_id=run_id, task_id=task_id, strategy=strategy
    )
    if memory:
        memory.start_episode(episode, position)
    return episode


def told(attempt: Attempt, verdict: Verdict) -> bool | None:
    """What the attempt's feedback-visible checks said; None when it tells nothing (no
    visible check, the endpoint failed, a check could not start)."""
    return None if tells_nothing(attempt, verdict) else verdict.visible_passed
