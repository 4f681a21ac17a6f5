"""How long `mulligan view`'s pages take to be ready on a HumanEval-sized study.

Offline: a temporary episode log gets a synthetic study of 164 tasks x 4 strategies (react,
retry, reflexion, reflexion-memory) with up to 3 attempts each, every attempt 4 steps of
thought, tool call and observation, a verdict with a visible and a hidden check, and the
reflexion strategies' lessons. Then each page is built as the server builds it (from a
read-only open of the log) and timed, best of `--repeat`; the static bundle of the run too.

    python benchmarks/view.py [--tasks 164] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mulligan.memory.log import EpisodeLog
from mulligan.memory.reading import MemoryReader
from mulligan.schema import (
    Attempt,
    CheckResult,
    Episode,
    Lesson,
    Step,
    ToolCall,
    ToolResult,
    Usage,
    Verdict,
)
from mulligan.view.app import Viewer
from mulligan.view.bundle import write_bundle

SHAPES = {"react": (1, False), "retry": (3, False), "reflexion": (3, True),
          "reflexion-memory": (3, True)}  # fmt: skip
"""Each synthetic strategy's trials and whether it writes (and is shown) lessons."""
STRATEGIES = list(SHAPES)
RUN = "bench-view"


def _attempt(task: str, trial: int, rng: random.Random, lessons: list[str]) -> Attempt:
    steps = []
    for i in range(4):
        call = ToolCall(id=f"c{i}", name="run_python", arguments='{"code": "print(1 + 1)"}')
        out = ToolResult(call_id=f"c{i}", name="run_python", status="ok", output="2\n" * 20)
        steps.append(Step(index=i, text=f"Let me try step {i} of {task}. " * 5, tool_calls=[call],
                          results=[out], usage=Usage(prompt_tokens=900, completion_tokens=80),
                          latency_s=rng.random()))  # fmt: skip
    answer = "\n".join(f"    line {n} of trial {trial} {rng.random():.3f}" for n in range(30))
    usage = Usage(prompt_tokens=3600, completion_tokens=320)
    return Attempt(task_id=task, trial=trial, steps=steps, answer="def f():\n" + answer,
                   usage=usage, lesson_ids=lessons)  # fmt: skip


def _verdict(passed: bool) -> Verdict:
    visible = CheckResult(
        type="python_tests",
        name="visible tests",
        passed=passed,
        score=float(passed),
        detail="assert f() == 2" * 3,
    )
    hidden = CheckResult(type="python_tests", name="hidden tests", visibility="hidden",
                         passed=passed, score=float(passed), detail="8 of 8")  # fmt: skip
    return Verdict.of([visible, hidden], feedback="tests failed" if not passed else "")


def build(log: EpisodeLog, tasks: int, seed: int = 0) -> tuple[str, str]:
    """The synthetic study; an episode with three attempts and a lesson with uses."""
    rng = random.Random(seed)
    task_ids = [f"HumanEval/{n}" for n in range(tasks)]
    config = {"command": "bench", "suite": "humaneval", "model": "synthetic", "task_order":
              task_ids, "strategies": STRATEGIES, "config": {"loop": {"trials": 3,
              "stop": "honest"}}}  # fmt: skip
    log.start_run(RUN, config)
    lesson_ids: list[str] = []
    longest = ""
    for strategy in STRATEGIES:
        for position, task in enumerate(task_ids):
            episode = Episode(id=f"{RUN}:{strategy}:{task}", run_id=RUN, task_id=task,
                              strategy=strategy)  # fmt: skip
            log.start_episode(episode, position)
            trials, reflects = SHAPES[strategy]
            for trial in range(1, trials + 1):
                passed = rng.random() < 0.35 * trial
                shown = lesson_ids[-2:] if reflects and trial > 1 else []
                attempt = _attempt(task, trial, rng, shown)
                episode.attempts.append(attempt)
                episode.verdicts.append(_verdict(passed))
                log.log_attempt(episode, attempt, episode.verdicts[-1])
                for lesson_id in shown:
                    log.lesson_event(lesson_id, "retrieved", episode.id, trial)
                if passed:
                    break
                if reflects:
                    text = f"Check the edge cases of {task}."
                    lesson = Lesson(id=f"L{len(lesson_ids)}", text=text)
                    log.log_lesson(lesson, stored=True)
                    log.lesson_event(lesson.id, "created", episode.id, trial)
                    lesson_ids.append(lesson.id)
                    episode.lessons_written.append(lesson.id)
            episode.passed = episode.verdicts[-1].passed
            log.end_episode(episode)
            if len(episode.attempts) == 3 and not longest:
                longest = episode.id
    log.end_run(RUN)
    return longest, lesson_ids[0]


def timed(make: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        make()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=164)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        memory = Path(tmp) / "memory"
        start = time.perf_counter()
        episode, lesson = build(EpisodeLog(memory / "episodes.db"), args.tasks)
        size = (memory / "episodes.db").stat().st_size
        print(f"synthetic study: {args.tasks} tasks x {len(STRATEGIES)} strategies, "
              f"log {size / 1e6:.1f} MB, built in {time.perf_counter() - start:.1f} s")  # fmt: skip
        viewer = Viewer(MemoryReader(memory))
        links = viewer.links
        for name, target in [
            ("runs", "/"),
            ("grid", links.run(RUN)),
            ("grid, filtered", links.run(RUN, "regressed", "reflexion")),
            ("episode (3 attempts)", links.episode(episode)),
            ("lesson", links.lesson(lesson)),
        ]:
            first = timed(lambda t=target: Viewer(viewer.reader).answer(t), 1)  # type: ignore[misc]
            seconds = timed(lambda t=target: viewer.answer(t), args.repeat)  # type: ignore[misc]
            status, _, body = viewer.answer(target)
            print(f"{name:<22} {first * 1000:8.0f} ms first, {seconds * 1000:6.0f} ms again  "
                  f"({status}, {len(body) / 1000:.0f} kB)")  # fmt: skip
        reader = MemoryReader(memory)
        out = Path(tmp) / "bundle"
        seconds = timed(lambda: write_bundle(reader, RUN, out), 1)
        files = len(list(out.iterdir()))
        print(f"{'bundle':<22} {seconds * 1000:8.0f} ms  ({files} files)")


if __name__ == "__main__":
    main()
