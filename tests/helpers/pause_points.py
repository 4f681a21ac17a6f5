"""A mulligan command that stops, alive, at a named point for its parent to kill.

    python -m tests.helpers.pause_points POINT N SIGNAL_FILE mulligan-arguments...

runs `mulligan mulligan-arguments...` in this process with wrappers around the model client,
the tool registry, the episode log and the lesson store. At the N-th time the run reaches
POINT it writes POINT to SIGNAL_FILE and waits forever, so that the parent kills it there
(SIGKILL) knowing exactly where it was; POINT `trace` appends every point reached, with its
count, to SIGNAL_FILE and never stops. Nothing of this is in mulligan itself.

The points:
- `actor-call`, `reflector-call`, `insight-call`, `selector-call`: a request of that role
  sent, its reply not yet back (`*-reply`: the reply back, not yet used);
- `answered`: the step with an attempt's final answer logged, the attempt not yet (its checks
  running);
- `tool-call`: a tool call the model asked for, logged as a step, not yet run;
- `reflector-charged`: the reflector's tokens for an attempt (a reflection's, an insight's)
  written into the log (with the reply, where the log keeps replies);
- `lesson-kept`: the first write (to the log or to the store) of a lesson that a reflection
  or an insight wrote, once per attempt, whatever else is kept after it still to come;
- `counted`: a use of lessons (`retrieved`, `helped`, `hurt`) counted in the log, the store's
  copy of their counters not yet rewritten;
- `selection-logged`: a selection strategy's pick written into the log;
- `verified`: a verification pair's evidence written into the log (the lesson's status, once
  its pairs are all counted, not yet);
- `commit`: the episode log about to commit a write (killed there, the write is lost), and
  `committed`: the log's next statement after a commit (the write kept, and whatever was done
  after it that is not in the log), whichever of mulligan's writes it is.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from mulligan.actor.tools import ToolRegistry
from mulligan.cli import main
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.memory.log import EpisodeLog
from mulligan.memory.store import LessonStore

ROLES = {
    "You review a failed attempt": "reflector",
    "An agent failed a task, then solved it": "insight",
    "Below is a programming task. Several programs": "selector",
    "Below is a programming task and two programs": "selector",
}
COUNTED = ("retrieved", "helped", "hurt")
"""The events that count a lesson's use."""
REFLECTED = ("diagnosis", "failure", "insight")
"""The kinds of lesson a reflection or an insight writes."""


ROOT = Path(__file__).resolve().parents[2]


def environment() -> dict[str, str]:
    """This process's, without an endpoint or a setting of the user's, importing this tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}
    return env | {"PYTHONPATH": str(ROOT), "MULLIGAN_LOCAL": "off"}


def killed_at(point: str, occurrence: int, argv: list[str], signal_file: Path) -> str:
    """`mulligan ARGV` killed with SIGKILL at the `occurrence`-th time it reaches `point`;
    returns the run id."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.pause_points", point, str(occurrence),
         str(signal_file), *argv],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environment(),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not signal_file.exists():
            assert child.poll() is None, f"the run ended before {point} {occurrence}"
            assert time.monotonic() < deadline, f"the run never reached {point} {occurrence}"
            time.sleep(0.01)
    finally:
        if child.returncode is None:  # (an assertion above may have found it ended)
            os.kill(child.pid, signal.SIGKILL)
        _, err = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    return re.findall(r"run id: ([\w-]+)", err)[0]


class Points:
    def __init__(self, point: str, occurrence: int, signal_file: Path) -> None:
        self.point, self.occurrence, self.signal_file = point, occurrence, signal_file
        self.seen: Counter[str] = Counter()
        self.units: set[tuple[str, int]] = set()
        """The (episode, trial) whose lessons were first written."""
        self.lock = threading.Lock()

    def reached(self, name: str) -> None:
        with self.lock:
            self.seen[name] += 1
            here = name == self.point and self.seen[name] == self.occurrence
            if self.point == "trace":  # every point, in order, and never a stop
                with self.signal_file.open("a") as trace:
                    trace.write(f"{name} {self.seen[name]}\n")
        if here:
            written = self.signal_file.with_suffix(".part")
            written.write_text(name)
            written.rename(self.signal_file)
            threading.Event().wait()  # until killed

    def install(self) -> None:
        chat, run = OpenAIChatModel.chat, ToolRegistry.run
        change_lessons, add = EpisodeLog.change_lessons, LessonStore.add_or_strengthen
        log_attempt, log_reply = EpisodeLog.log_attempt, EpisodeLog.log_reply
        log_step = EpisodeLog.log_step

        def role_of(messages: list[dict[str, Any]]) -> str:
            first = str(messages[0].get("content", "")) if messages else ""
            return next((role for mark, role in ROLES.items() if first.startswith(mark)), "actor")

        def chatting(model: OpenAIChatModel, messages: list[Any], **kwargs: Any) -> Any:
            role = role_of(messages)
            self.reached(f"{role}-call")
            response = chat(model, messages, **kwargs)
            self.reached(f"{role}-reply")
            return response

        def running(registry: ToolRegistry, call: Any, **kwargs: Any) -> Any:
            self.reached("tool-call")
            return run(registry, call, **kwargs)

        def kept(lessons: list[Any]) -> None:
            for lesson in lessons:
                unit = (lesson.source.episode_id, lesson.source.trial)
                if lesson.kind in REFLECTED and unit not in self.units:
                    self.units.add(unit)
                    self.reached("lesson-kept")

        def changing(log: EpisodeLog, lessons: list[Any], event: str, *args: Any, **kw: Any) -> Any:
            changed = change_lessons(log, lessons, event, *args, **kw)
            if event == "created":
                kept(lessons)
            if event in COUNTED:
                self.reached("counted")
            if event == "verified":
                self.reached("verified")
            return changed

        def adding(store: LessonStore, lesson: Any) -> Any:
            added = add(store, lesson)
            kept([lesson])
            return added

        def logging_step(log: EpisodeLog, episode_id: str, trial: int, step: Any) -> None:
            log_step(log, episode_id, trial, step)
            if step.kind == "final":
                self.reached("answered")

        def logging_attempt(log: EpisodeLog, episode: Any, attempt: Any, verdict: Any) -> Any:
            logged = log_attempt(log, episode, attempt, verdict)
            if "reflector" in attempt.usage_by_role:
                self.reached("reflector-charged")
            if attempt.selection is not None:
                self.reached("selection-logged")
            return logged

        def logging_reply(log: EpisodeLog, episode: Any, attempt: Any, *args: Any) -> Any:
            logged = log_reply(log, episode, attempt, *args)
            if "reflector" in attempt.usage_by_role:
                self.reached("reflector-charged")
            return logged

        def connecting(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            connection = connect(*args, **kwargs)
            if str(args[0] if args else kwargs["database"]).endswith("episodes.db"):
                after = [False]

                def traced(statement: str) -> None:
                    if after[0]:
                        after[0] = False
                        self.reached("committed")
                    if statement.strip().upper() == "COMMIT":
                        self.reached("commit")
                        after[0] = True

                connection.set_trace_callback(traced)
            return connection

        connect = sqlite3.connect
        sqlite3.connect = connecting  # type: ignore[assignment]
        OpenAIChatModel.chat = chatting  # type: ignore[method-assign]
        ToolRegistry.run = running  # type: ignore[method-assign]
        EpisodeLog.change_lessons = changing  # type: ignore[method-assign]
        LessonStore.add_or_strengthen = adding  # type: ignore[method-assign]
        EpisodeLog.log_step = logging_step  # type: ignore[method-assign]
        EpisodeLog.log_attempt = logging_attempt  # type: ignore[method-assign]
        EpisodeLog.log_reply = logging_reply  # type: ignore[method-assign]


if __name__ == "__main__":
    point, occurrence, signal_file, *argv = sys.argv[1:]
    Points(point, int(occurrence), Path(signal_file)).install()
    sys.exit(main(argv))
