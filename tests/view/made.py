"""Memories for the viewer's tests: a logged run whose grid is known cell by cell (with a
hostile answer and lesson text), optionally beside the demo study on the scripted model."""

from __future__ import annotations

import contextlib
import io
import itertools
from collections.abc import Callable
from pathlib import Path

from mulligan.memory.log import EpisodeLog
from mulligan.schema import Attempt, CheckResult, Lesson, Step, Usage, Verdict
from tests.helpers.logged_runs import log_run

HOSTILE = "<script>window.__pwned=1</script>"
RUN = "fixture-run"
LESSON = Lesson(id="lesson-units", text="Convert km to metres. " + HOSTILE)


def verdict(passed: bool) -> Verdict:
    """A visible check that agrees with the hidden one (an honest stop ends on a pass)."""
    visible = CheckResult(
        type="exact_match",
        name="answer",
        passed=passed,
        score=float(passed),
        detail="visible says " + ("yes" if passed else "no"),
    )
    hidden = CheckResult(type="python_tests", name="hidden tests", visibility="hidden",
                         passed=passed, score=float(passed), detail="secret detail")  # fmt: skip
    return Verdict.of([visible, hidden], feedback="FAIL answer" if not passed else "PASS answer")


MADE = {
    "react": {"t1": [verdict(True)], "t2": [verdict(False)], "t3": [verdict(False)],
              "t4": [verdict(True)]},
    "reflexion": {"t1": [verdict(False), verdict(False)], "t2": [verdict(False), verdict(True)],
                  "t3": [verdict(False), verdict(False)], "t4": [verdict(True)]},
}  # fmt: skip
"""reflexion against react: t1 regressed, t2 rescued at trial 2, t3 never, t4 solved."""
EXPECTED = {
    "react": {"t1": "solved", "t2": "never", "t3": "never", "t4": "solved"},
    "reflexion": {"t1": "regressed", "t2": "rescued", "t3": "never", "t4": "solved"},
}
CONFIG = {"command": "bench", "suite": "fixture", "model": "scripted",
          "strategies": ["react", "reflexion"], "task_order": ["t1", "t2", "t3", "t4"],
          "config": {"loop": {"trials": 2, "stop": "honest"}}}  # fmt: skip
ANSWERS = {2: "second answer\nline two"}


REPEATED = 9
"""The 10th attempt logged (reflexion's trial 2 at t3) gives trial 1's answer again."""


def _attempts() -> Callable[[int, bool], Attempt]:
    made = itertools.count()

    def attempt(trial: int, last: bool) -> Attempt:
        n = next(made)
        answer = HOSTILE if trial == 1 else (HOSTILE + "  \n" if n == REPEATED else ANSWERS[2])
        return _attempt(trial, answer)

    return attempt


def _attempt(trial: int, answer: str) -> Attempt:
    step = Step(
        index=0,
        text="Thinking about it " + HOSTILE,
        kind="final",
        usage=Usage(prompt_tokens=100 + trial, completion_tokens=7),
        latency_s=0.25,
    )
    return Attempt(task_id="", trial=trial, steps=[step], answer=answer,
                   usage=Usage(prompt_tokens=100 + trial, completion_tokens=7),
                   lesson_ids=[LESSON.id] if trial > 1 else [])  # fmt: skip


def make_logged_run(memory: Path) -> EpisodeLog:
    """The fixture run in `memory` (made if missing); trial 2 was shown LESSON."""
    log = EpisodeLog(memory / "episodes.db")
    log_run(log, RUN, CONFIG, MADE, _attempts())
    episode = f"{RUN}:reflexion:t2"
    log.log_lesson(LESSON.model_copy(update={"source": LESSON.source.model_copy(
        update={"episode_id": f"{RUN}:reflexion:t1", "task_id": "t1", "trial": 1})}),
        stored=True)  # fmt: skip
    log.lesson_event(LESSON.id, "retrieved", episode, 2)
    log.lesson_event(LESSON.id, "helped", episode, 2)
    log.reflection_done(f"{RUN}:reflexion:t1", 1, [LESSON.id])
    return log


def make_demo(out: Path) -> str:
    """`mulligan demo` (the study on the scripted model) into `out`; its run id."""
    from mulligan.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["demo", "--out", str(out)]) == 0
    runs = EpisodeLog(out / "memory" / "episodes.db").runs()
    return str(runs[-1]["id"])
