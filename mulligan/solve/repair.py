"""The repair pipeline: N candidate edits from one localised failure, selected by the checks.

Each candidate asks the model, shown the failing test, its assertion, the check's output and
the implicated functions with line numbers, for a search/replace edit; applies it to a fresh
copy of the project, or refuses it (the SEARCH lines are not there, the file would not parse,
it edits a test, it is the same change as an earlier candidate's) and asks again in a fresh
prompt with the reason, at no check run; then runs the checks in that copy. Candidates run
`concurrency` at a time, a round; what a round's failed candidates did goes to the next round
as feedback (with a reflector's diagnosis, whose general lesson goes to the project's memory
as the agent loop's would). The episode ends at the first round
with a candidate whose checks pass; of those, the one with the fewest changed lines (then the
earliest) is selected. It is logged as the loop logs an episode: attempts with their steps,
changes and verdicts.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from mulligan import prompts, sandbox, strategies
from mulligan.errors import ModelError
from mulligan.llm.base import ChatModel, Message
from mulligan.memory import Memory
from mulligan.memory.memory import episode_for
from mulligan.memory.written import Written
from mulligan.reflector import Reflector
from mulligan.schema import Attempt, CheckResult, Episode, Lesson, Step, Task, Verdict
from mulligan.settings.run_config import LoopSection, RunConfig
from mulligan.solve.cold import Ran, cold_edit
from mulligan.solve.context import Diagnosis, repair_prompt
from mulligan.solve.copies import ChangeRecordingEvaluator, ProjectCopies
from mulligan.solve.edits import Refused, parse_blocks, planned
from mulligan.solve.localise import read_failure

log = logging.getLogger("mulligan")
EARLIER_KEPT = 3
"""How many failed candidates' notes the next round's prompt carries (the latest)."""
PASSED_TESTS = re.compile(r"(\d+) passed")


@dataclass
class RepairSettings:
    loop: LoopSection = field(default_factory=lambda: LoopSection(min_similarity=0.0))
    """The run's [loop] settings: its trials are the candidates in all (each one a check run
    at most); its similarity floor retrieves the project's lessons."""
    concurrency: int = 1
    """Candidates at once: a round."""
    edit_retries: int = 1
    """Times a candidate is asked again after its edit was refused (no check runs for those)."""
    max_tokens: int | None = 1024
    timeout: float | None = None
    retrieved_lessons: int = 3
    show_candidates: bool = False
    """Lessons not yet verified are shown too (marked); by default validated ones only."""

    @classmethod
    def of(cls, config: RunConfig) -> RepairSettings:
        """From the run's configuration: --trials, --concurrency, --max-reply-tokens."""
        return cls(
            loop=config.loop,
            concurrency=config.run.concurrency,
            max_tokens=config.budget.max_reply_tokens,
            show_candidates=config.memory.show_candidates,
        )


@dataclass
class Outcome:
    episode: Episode
    chosen: Attempt | None
    """The selected attempt whose checks pass (None: no candidate passed)."""


@dataclass
class Candidate:
    attempt: Attempt
    verdict: Verdict
    refused: str = ""
    """Why its last edit was refused ('' when one was applied and the checks ran)."""


@dataclass
class RepairPipeline:
    model: ChatModel
    copies: ProjectCopies
    evaluator: ChangeRecordingEvaluator
    policy: sandbox.Policy
    settings: RepairSettings = field(default_factory=RepairSettings)
    memory: Memory | None = None
    reflector: Reflector | None = None
    run_id: str = ""
    strategy: strategies.Strategy = strategies.PATCH
    """`patch`, or `patch[diverse]`: its candidates drawn across the temperature ladder."""
    _tried: dict[tuple[tuple[str, str], ...], int] = field(default_factory=dict, init=False)
    """Each edit checked (or being checked) in this run, and the trial that made it."""
    _tried_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _ran: Ran = field(default_factory=dict, init=False)
    """The lines the failing test ran, where the trace holds them all (solve/cold.py)."""

    def run(self, task: Task, diagnosis: Diagnosis, request: str, episode_id: str) -> Outcome:
        """`request`: the user's task in their words; `task`: its checks and id."""
        episode = episode_for(self.memory, episode_id, self.run_id, task.id, self.strategy.name)
        self._ran = diagnosis.ran
        lessons = self._lessons(task, episode)
        earlier = [_note(a, v) for a, v in zip(episode.attempts, episode.verdicts, strict=True)]
        passing = [a for a, v in zip(episode.attempts, episode.verdicts, strict=True) if v.passed]
        trial = len(episode.attempts) + 1
        while not passing and trial <= self.settings.loop.trials:
            size = min(self.settings.concurrency, self.settings.loop.trials - trial + 1)
            project = self.copies.project.directory.name
            given = {
                t: lessons + self._assigned(task, episode, t, lessons)
                for t in range(trial, trial + size)
            }
            asks = [
                (
                    task,
                    repair_prompt(
                        diagnosis, t, request, project, [x.text for x in given[t]],
                        earlier[-EARLIER_KEPT:],
                    ),
                    diagnosis.shown_files(t),
                    [x.id for x in given[t]],
                    t,
                )
                for t in given
            ]  # fmt: skip
            done = self._round(asks)
            for candidate in done:  # logged here, in trial order: one thread writes the log
                self._log(episode, candidate, given[candidate.attempt.trial])
            passing = [c.attempt for c in done if c.verdict.passed]
            earlier += [_note(c.attempt, c.verdict) for c in done]
            trial += size
            if not passing and trial <= self.settings.loop.trials:
                earlier += self._reflect(task, episode, done, lessons)
        chosen = selected(episode) if passing else None
        episode.passed = chosen is not None
        if self.memory:
            self.memory.finish_episode(episode)
        return Outcome(episode, chosen)

    # ------------------------------------------------------------ one round, one candidate

    def _round(
        self, asks: list[tuple[Task, str, dict[str, set[int]], list[str], int]]
    ) -> list[Candidate]:
        """One candidate per trial, each with its prompt, the files and the lessons it was
        shown; at once."""
        if len(asks) == 1:
            return [self._candidate(*asks[0])]
        with ThreadPoolExecutor(max_workers=len(asks)) as pool:
            return list(pool.map(lambda ask: self._candidate(*ask), asks))

    def _candidate(
        self, task: Task, prompt: str, shown: dict[str, set[int]], lesson_ids: list[str], trial: int
    ) -> Candidate:
        started = time.monotonic()
        attempt = Attempt(
            task_id=task.id, trial=trial, model=self.model.name, protocol="text",
            lesson_ids=lesson_ids,
        )  # fmt: skip
        messages: list[Message] = [{"role": "user", "content": prompt}]
        with self.copies(task) as workspace:
            attempt.workspace = str(workspace)
            refused = ""
            for _ in range(self.settings.edit_retries + 1):
                reply = self._ask(attempt, messages, trial)
                if reply is None:
                    break
                try:
                    read = _reader(workspace)
                    plan = planned(parse_blocks(reply), read, shown)
                    cold = cold_edit(self._ran, read, plan.texts)
                    if cold:
                        raise Refused(cold)
                    self._claim(plan.texts, trial)
                except Refused as exc:
                    refused = attempt.steps[-1].feedback = str(exc)
                    # a fresh prompt with the reason: shown its refused reply as its own
                    # turn, a small model writes it again word for word
                    again = prompts.render("repair_refused", reason=refused)
                    messages = [{"role": "user", "content": f"{prompt}\n\n{again}"}]
                    continue
                attempt.steps[-1].feedback = "\n".join(f"not applied: {s}" for s in plan.skipped)
                for path, text in plan.texts.items():
                    (workspace / path).write_bytes(text.encode(errors="surrogateescape"))
                attempt.seconds = time.monotonic() - started
                verdict = self.evaluator.evaluate(task, attempt, workspace, self.policy)
                return Candidate(attempt, verdict)
        attempt.seconds = time.monotonic() - started
        reason = attempt.error or refused
        verdict = _not_checked(task, reason)
        if self.evaluator.on_verdict:
            self.evaluator.on_verdict(attempt, verdict)
        return Candidate(attempt, verdict, refused=reason)

    def _claim(self, texts: dict[str, str], trial: int) -> None:
        """Keep this edit for `trial`, or refuse it as one an earlier candidate made: the
        checks are deterministic, so checking it again would tell nothing new."""
        key = tuple(sorted(texts.items()))
        with self._tried_lock:
            first = self._tried.setdefault(key, trial)
        if first != trial:
            raise Refused(
                f"it is the same change as attempt {first}, whose checks have run or are "
                "running; make a different edit"
            )

    def _ask(self, attempt: Attempt, messages: list[Message], trial: int) -> str | None:
        """The model's reply, recorded as a step; None when the endpoint failed."""
        began = time.monotonic()
        attempt.drawn_temperature = self.strategy.draw(trial, self.settings.loop).temperature
        try:
            response = self.model.chat(
                messages, max_tokens=self.settings.max_tokens, timeout=self.settings.timeout,
                temperature=attempt.drawn_temperature,
            )  # fmt: skip
        except ModelError as exc:
            attempt.stop_reason, attempt.error = "model_error", str(exc)
            return None
        attempt.steps.append(
            Step(
                index=len(attempt.steps), text=response.text, kind="final",
                usage=response.usage, latency_s=time.monotonic() - began,
                finish_reason=response.finish_reason,
            )
        )  # fmt: skip
        attempt.charge("actor", response.usage)
        attempt.answer = response.text
        return response.text

    # ------------------------------------------------------------ memory and the log

    def _lessons(self, task: Task, episode: Episode) -> list[Lesson]:
        if not self.memory or not self.settings.retrieved_lessons:
            return []
        return self.memory.retrieve(
            task, self.settings.retrieved_lessons, set(), episode.id, 1,
            min_similarity=self.settings.loop.min_similarity,
            candidates=self.settings.show_candidates,
        )  # fmt: skip

    def _assigned(
        self, task: Task, episode: Episode, trial: int, lessons: list[Lesson]
    ) -> list[Lesson]:
        """From candidate 2 on, the project's candidate lesson when its assignment shows it
        (verification while working, mulligan/memory/assignment.py); with --show-candidates
        every candidate is among `lessons` already."""
        memory, k = self.memory, self.settings.retrieved_lessons
        if not memory or not k or self.settings.show_candidates or memory.frozen:
            return []
        shown = {lesson.id for lesson in lessons}
        floor = self.settings.loop.min_similarity
        return memory.in_work.tried(task, episode.id, trial, shown, k, floor)

    def _log(self, episode: Episode, candidate: Candidate, lessons: list[Lesson]) -> None:
        episode.attempts.append(candidate.attempt)
        episode.verdicts.append(candidate.verdict)
        if self.memory:
            given = [] if candidate.refused else lessons  # a refused edit tested no lesson
            self.memory.finish_attempt(episode, candidate.attempt, candidate.verdict, given)

    def _reflect(
        self, task: Task, episode: Episode, done: list[Candidate], lessons: list[Lesson]
    ) -> list[str]:
        """A diagnosis of the round's best failed candidate, for the next round; its general
        lesson kept in the project's memory. Nothing when every candidate was refused."""
        checked = [c for c in done if not c.refused]
        if not self.reflector or not checked:
            return []
        best = min(checked, key=lambda c: len(changed_lines(c.attempt.changes)))
        reflection = self.reflector.reflect(task, best.attempt, best.verdict, lessons, episode.id)
        episode.attempts[-1].charge("reflector", self.reflector.take_usage())
        lessons = [r for r in [reflection.diagnosis, *reflection.lessons] if r is not None]
        written = Written(lessons=lessons, to_store=True)  # the general lessons, persistently
        if self.memory:  # whole or not at all, with its charges (memory/written.py)
            self.memory.keep_written(episode, written)
        else:
            episode.lessons_written += [lesson.id for lesson in lessons]
        diagnosis = reflection.diagnosis
        return [f"A reviewer's diagnosis: {diagnosis.text}"] if diagnosis else []


def _reader(workspace: Path) -> Callable[[str], str | None]:
    def read(path: str) -> str | None:
        target = (workspace / path).resolve()
        if not target.is_relative_to(workspace.resolve()) or not target.is_file():
            return None
        try:
            return target.read_bytes().decode(errors="surrogateescape")
        except OSError:
            return None

    return read


def _not_checked(task: Task, reason: str) -> Verdict:
    """The verdict of a candidate whose edit was refused: no check ran, none passed."""
    detail = f"not run: the edit was refused before the checks ({reason})"
    checks = [
        CheckResult(type=c.type, name=c.name, visibility=c.visibility, passed=False, score=0.0,
                    detail=detail)
        for c in task.checks
    ]  # fmt: skip
    return Verdict.of(checks, feedback=f"The edit was refused; no check ran: {reason}")


def _note(attempt: Attempt, verdict: Verdict) -> str:
    """What a failed candidate did and what came of it, for the next round's prompt."""
    changed = changed_lines(attempt.changes)
    if not changed:
        return f"Attempt {attempt.trial}: {verdict.feedback[:600]}"
    failure = read_failure(verdict.feedback, [])
    said = failure.assertion or verdict.feedback[-400:]
    return (
        f"Attempt {attempt.trial} changed:\n"
        + "\n".join(changed[:12])
        + f"\nThe check then said: {said[:600]}"
    )


def changed_lines(diff: str) -> list[str]:
    """The lines a unified diff removes or adds (not its headers)."""
    return [
        line
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))
    ]


def selected(episode: Episode) -> Attempt | None:
    """The best attempt that passed every check with a change, by what the checks said: the
    most checks passed, then the most tests passed (the largest `N passed` the output
    reports, as pytest counts them), then the fewest changed lines, then the earliest; None
    if none passed."""

    def rank(pair: tuple[Attempt, Verdict]) -> tuple[int, int, int, int]:
        attempt, verdict = pair
        checks = sum(c.passed for c in verdict.checks)
        tests = max((int(n) for n in PASSED_TESTS.findall(verdict.feedback)), default=0)
        return (-checks, -tests, len(changed_lines(attempt.changes)), attempt.trial)

    passing = [(a, v) for a, v in zip(episode.attempts, episode.verdicts, strict=True) if v.passed]
    return min(passing, key=rank)[0] if passing else None
