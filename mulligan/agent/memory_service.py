"""The memory as a service to an agent that is not mulligan's: before an attempt it asks
`recall(task)` what to show, after it `report`s how the attempt went.

Each task a client names is an episode of the service's run in the memory's episode log, and
each report an attempt of it (the answer, the lessons it was shown, a verdict of one
feedback-visible check saying what the client's own checks said), so the lessons' provenance,
`mulligan episodes show` and the viewer read them as any run's. A recall shows what a memory
arm's attempt is shown (`Memory.recall`: validated lessons, and from the second attempt at a
task the relevant candidate when verification's assignment says so); a report is its outcome,
counted as the loop counts an attempt's (`Memory.finish_attempt`: online, and as half of a
verification pair). After a failure the reflector writes a diagnosis (shown again at this
task's next recall in the same session) and at most one general lesson, kept as a candidate:
nothing a client's agent wrote is a rule until verified.

Bad arguments (a blank task, a lesson id the memory does not hold or one recall never
shows) are `UserError`s raised before anything is stored. A reflector that fails or cannot
be reached leaves the outcome recorded and the report saying so.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any

from mulligan.errors import EndpointUnreachable, UserError
from mulligan.loop import LoopSettings
from mulligan.memory import Memory
from mulligan.memory.memory import episode_for
from mulligan.memory.validity import ACTIVE, evidence_phrase
from mulligan.memory.written import Written
from mulligan.reflector import Reflector
from mulligan.reflector.reflect import Reflection
from mulligan.schema import Attempt, CheckResult, Episode, Lesson, Step, Task, Usage, Verdict
from mulligan.strategies.carry import unseen
from mulligan.text_cut import head, id_words

STRATEGY = "memory-service"
"""The episodes' strategy in the log: attempts made by the client's agent, not by mulligan."""
REPORTED = "reported"
"""The name of the one check of a reported verdict: the client's own checks, as it said."""
MAX_TEXT = 20_000
"""Longer answers and feedback are kept cut to this many characters."""


class MemoryService:
    """`recall` and `report` over one memory, for the run `run_id` (one per service)."""

    def __init__(
        self,
        memory: Memory,
        reflector: Reflector | None,
        settings: LoopSettings,
        run_id: str,
        family: str = "",
    ) -> None:
        self.memory = memory
        self.reflector = reflector
        self.settings = settings
        self.run_id = run_id
        self.family = family or str(Task.model_fields["family"].default)
        self._lock = threading.Lock()
        self._episodes: dict[str, Episode] = {}

    # ------------------------------------------------------------ the two calls

    def recall(self, task: str, family: str = "") -> dict[str, Any]:
        """What to show an attempt at this task (see the module; `show_candidates`: every
        candidate), each lesson as the log holds it now (an assigned candidate keeps its own
        status), with its id (to report back), kind, evidence and whether it was assigned."""
        chosen, s = self._task(task, family), self.settings
        with self._lock:
            episode = self._episode(chosen)
            trial = len(episode.attempts) + 1
            found = self.memory.recall(
                chosen, episode.id, trial, k=s.retrieved_lessons,
                exclude=set(episode.lessons_written), min_similarity=s.min_similarity,
                show_candidates=s.show_candidates,
            )  # fmt: skip
            truth = {x.id: x for x in self.memory.lessons([lesson.id for lesson in found])}
            assigned = self.memory.assignment(episode.id, trial)
            carried = self._diagnoses(episode)
        tried = assigned.lesson_id if assigned and assigned.shown else None
        return {
            "task_id": chosen.id,
            "attempt": trial,
            "lessons": [described(truth.get(x.id, x), x.id == tried) for x in found],
            "diagnoses": [described(x, False) for x in carried],
        }

    def report(
        self,
        task: str,
        answer: str,
        passed: bool,
        feedback: str = "",
        shown: Sequence[str] = (),
        family: str = "",
    ) -> dict[str, Any]:
        """Record one attempt's outcome for the lessons it was shown; after a failure, the
        reflector's diagnosis and lesson (a candidate). The reflector is asked before anything
        is written: a server killed while it answers has stored nothing of the report, which
        its client, never answered, makes again."""
        chosen = self._task(task, family)
        outcome = checked_outcome(answer, passed, feedback)
        given = self._known(shown, self._episode_id(chosen))  # all checked before any is stored
        with self._lock:
            episode = self._episode(chosen)
            attempt, verdict = reported(chosen, len(episode.attempts) + 1, *outcome)
            attempt.lesson_ids = [lesson.id for lesson in given]
            written, reflection = self._reflection(chosen, episode, attempt, verdict, given)
            episode.attempts.append(attempt)
            episode.verdicts.append(verdict)
            episode.passed = passed
            # an attempt that was not the arm it was assigned (the client left out the
            # candidate it was given to try) makes no half of a verification pair: its outcome
            # is counted online only, so a pair compares attempts that differ in the candidate
            assigned = self.memory.assignment(episode.id, attempt.trial)
            if assigned and assigned.shown != (assigned.lesson_id in attempt.lesson_ids):
                self.memory.record_outcome(episode.id, attempt.trial, None, [])  # told nothing
            self.memory.finish_attempt(episode, attempt, verdict, given)
            kept = self.memory.keep_written(episode, written) if written else []
            self.memory.finish_episode(episode)
        counted = self.memory.lessons([lesson.id for lesson in given])
        return {
            "task_id": chosen.id,
            "attempt": attempt.trial,
            "recorded": "passed" if passed else "failed",
            "shown": [described(x, False) for x in counted],
            "written": [described(x, False) for x in kept],
            "reflection": reflection,
        }

    # ------------------------------------------------------------ what they share

    def _task(self, text: str, family: str) -> Task:
        if not isinstance(text, str) or not text.strip():
            raise UserError("task: blank; pass the task's text, as the agent is given it")
        if not isinstance(family, str):
            raise UserError(f"family: text, not {type(family).__name__}")
        family = family.strip() or self.family
        digest = hashlib.sha256(f"{family}\n{text}".encode()).hexdigest()[:12]
        words = id_words(text, 5)
        return Task(id="-".join([*words, digest]), family=family, prompt=text)

    def _known(self, ids: Sequence[str], episode_id: str) -> list[Lesson]:
        """The lessons of these ids, refused (nothing stored) if the memory lacks any, or if
        one is a lesson recall never shows (refuted, retracted, ...) that this task's episode
        was not shown while it could be."""
        if isinstance(ids, str) or not all(isinstance(i, str) for i in ids):
            raise UserError("shown: a list of lesson ids, as recall returned them")
        wanted = list(dict.fromkeys(i.strip() for i in ids))
        found = {lesson.id: lesson for lesson in self.memory.lessons(wanted)}
        missing = [i for i in wanted if i not in found]
        if missing:
            named = ", ".join(map(repr, missing[:5]))
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise UserError(
                f"shown: no lesson {named}{more} in {self.memory.where}; "
                "name only the ids recall returned (nothing was recorded)"
            )
        retired = [found[i] for i in wanted if found[i].validity.status not in ACTIVE]
        touched = set(self.memory.log.lessons_touched(episode_id)) if retired else set()
        for lesson in retired:
            if lesson.id not in touched:
                raise UserError(
                    f"shown: lesson {lesson.id!r} is {lesson.validity.status}: recall never "
                    "shows it, and showed it at this task before it was; name only the ids "
                    "recall returned (nothing was recorded)"
                )
        return [found[i] for i in wanted]

    def _episode_id(self, task: Task) -> str:
        return f"{self.run_id}:{task.id}"

    def _episode(self, task: Task) -> Episode:
        """This session's episode of the task, started at its first recall or report."""
        if task.id not in self._episodes:
            self._episodes[task.id] = episode_for(
                self.memory, self._episode_id(task), self.run_id, task.id, STRATEGY,
                len(self._episodes),
            )  # fmt: skip
        return self._episodes[task.id]

    def _diagnoses(self, episode: Episode) -> list[Lesson]:
        """This episode's last diagnoses, as the loop carries them to the next attempt."""
        written = self.memory.lessons(episode.lessons_written)
        diagnoses = [lesson for lesson in written if lesson.kind == "diagnosis"]
        return diagnoses[-self.settings.carried_reflections :] if diagnoses else []

    def _reflection(
        self, task: Task, episode: Episode, attempt: Attempt, verdict: Verdict, given: list[Lesson]
    ) -> tuple[Written | None, str]:
        """What the reflector wrote on this attempt, not yet kept (its diagnosis, and a
        general lesson to store as a candidate), and what became of the reflection."""
        if verdict.passed:
            return None, "none: the attempt passed"
        if self.reflector is None:
            return None, "none: no reflector"
        try:
            reflection = self.reflector.reflect(task, attempt, verdict, given, episode.id)
        except EndpointUnreachable as exc:  # no resume here to redo it: the outcome is kept
            reflection = Reflection(failed=str(exc))
            self.reflector.usage += Usage(unmetered_calls=exc.unmetered_calls)
        attempt.charge("reflector", self.reflector.take_usage())
        if reflection.failed:
            return None, f"failed: {reflection.failed}; the outcome is recorded, no lesson written"
        found = ([reflection.diagnosis] if reflection.diagnosis else []) + reflection.lessons
        own = self.memory.lessons(episode.lessons_written)
        return Written(lessons=unseen(found, own + given), to_store=True), "done"


def checked_outcome(answer: str, passed: bool, feedback: str) -> tuple[str, bool, str]:
    """A report's outcome as the log keeps it (long texts cut), or a `UserError`."""
    for name, value in (("answer", answer), ("feedback", feedback)):
        if not isinstance(value, str):
            raise UserError(f"{name}: text, not {type(value).__name__}")
    if not isinstance(passed, bool):
        raise UserError("passed: true or false, what the agent's own checks said")
    return head(answer, MAX_TEXT), passed, head(feedback, MAX_TEXT)


def reported(
    task: Task, trial: int, answer: str, passed: bool, feedback: str
) -> tuple[Attempt, Verdict]:
    """An attempt the client made, as the log keeps one: its answer as the final step, and
    a verdict of one feedback-visible check standing for the client's own."""
    step = Step(index=0, text=answer, kind="final")
    attempt = Attempt(task_id=task.id, trial=trial, steps=[step], answer=answer, model="client")
    check = CheckResult(
        type=REPORTED, name=REPORTED, passed=passed, score=float(passed), detail=feedback
    )
    return attempt, Verdict.of([check], feedback=feedback)


def described(lesson: Lesson, assigned: bool) -> dict[str, Any]:
    """A lesson as a client sees it: enough to show it, report it, and judge it."""
    v = lesson.validity
    return {
        "id": lesson.id,
        "status": v.status,
        "kind": lesson.kind,
        "text": lesson.text,
        "evidence": evidence_phrase(v),
        "shown_before": v.retrieved,
        "assigned": assigned,
    }
