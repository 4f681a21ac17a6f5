"""A pytest plugin that `solve` copies into a throwaway copy of the project: it runs the
failing test alone and records what the implicated functions did, line by line.

It imports nothing of mulligan: it runs under the project's own Python, in the box. What to
trace comes in the environment variable MULLIGAN_TRACE (JSON):

    {"test": "test_x[1]", "targets": [["pkg/mod.py", 10, 24], ...], "out": "PATH",
     "events": 60, "chars": 80}

`test`: the failing test's name (pytest's item name, or the end of its node id; "" for the
first test that fails); `targets`: files and the line ranges of the functions to trace;
`out`: where the record goes, written once, for the first traced test that fails. A record
is a list of calls, each `{"path", "first_line", "target", "events": [[kind, line, {name: repr}],
...]}` (`target`: the index of its function in `targets`; `events` at most so many per target)
with kind `call` (the arguments), `line` (each line that ran, in order, with the variables it
changed, taken when the next line starts), `return` (the value, under `return`) or
`exception` (under `raise`). The test's setup (its fixtures) is traced with its call.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Generator
from types import FrameType
from typing import Any

import pytest

SPEC: dict[str, Any] = json.loads(os.environ.get("MULLIGAN_TRACE") or "{}")
LIMIT = int(SPEC.get("events", 60))
CHARS = int(SPEC.get("chars", 80))
_written = False


def _short(value: object) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - a repr that raises says so
        text = f"<repr failed: {type(exc).__name__}>"
    return text if len(text) <= CHARS else text[: CHARS - 1] + "…"


def _target(frame: FrameType) -> int | None:
    """Which of the targets the frame runs (its index); None for none of them."""
    if frame.f_code.co_name.startswith("<"):  # a comprehension or lambda: its function's
        return None
    path = frame.f_code.co_filename.replace("\\", "/")
    line = frame.f_code.co_firstlineno
    for index, (target, start, end) in enumerate(SPEC.get("targets", [])):
        if (path == target or path.endswith("/" + target)) and start <= line <= end:
            return index
    return None


class Recorder:
    """Each target's calls, up to LIMIT events per target (a loop in one does not crowd
    out the others)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.counts: dict[int, int] = {}

    def global_trace(self, frame: FrameType, event: str, arg: object) -> Callable[..., Any] | None:
        target = _target(frame) if event == "call" else None
        if target is None or self.counts.get(target, 0) >= LIMIT:
            return None
        path = frame.f_code.co_filename.replace("\\", "/")
        call: dict[str, Any] = {
            "path": path,
            "function": frame.f_code.co_name,
            "first_line": frame.f_code.co_firstlineno,
            "target": target,
            "events": [],
        }
        self.calls.append(call)
        seen = {name: _short(value) for name, value in frame.f_locals.items()}
        self._add(call, ["call", frame.f_lineno, dict(seen)])
        last = 0  # the line about to run; 0 before the first

        def local_trace(frame: FrameType, event: str, arg: object) -> Callable[..., Any] | None:
            nonlocal seen, last
            now = {name: _short(value) for name, value in frame.f_locals.items()}
            changed = {k: v for k, v in now.items() if seen.get(k) != v}
            seen = now
            if event == "line":
                if last:
                    self._add(call, ["line", last, changed])
                last = frame.f_lineno
            elif event == "return":
                if last:
                    self._add(call, ["line", last, changed])
                self._add(call, ["return", frame.f_lineno, {"return": _short(arg)}])
            elif event == "exception" and isinstance(arg, tuple) and len(arg) >= 2:
                self._add(call, ["exception", frame.f_lineno, {"raise": _short(arg[1])}])
            return local_trace if self.counts[target] < LIMIT else None

        return local_trace

    def _add(self, call: dict[str, Any], event: list[Any]) -> None:
        target = call["target"]
        if self.counts.get(target, 0) < LIMIT:
            call["events"].append(event)
            self.counts[target] = self.counts.get(target, 0) + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Only the failing test runs, when its name is known and found."""
    name = SPEC.get("test") or ""
    keep = [i for i in items if name and (i.name == name or i.nodeid.endswith("::" + name))]
    if keep:
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep[:1]


_recorders: dict[str, Recorder] = {}
"""Each traced test's recorder, by node id: its setup and call, until its report is made."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    """The test's call, traced into the test's one recorder; as `pytest_runtest_setup`, its
    fixtures too: what they run can make the test fail too."""
    recorder = _recorders.setdefault(item.nodeid, Recorder())
    before = sys.gettrace()
    sys.settrace(recorder.global_trace)
    try:
        yield
    finally:
        sys.settrace(before)


pytest_runtest_setup = pytest_runtest_call


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, Any, None]:
    """The first traced test that failed is written out (a unittest TestCase's failure is
    known only here, not as the call's exception)."""
    global _written
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed and not _written and SPEC.get("out"):
        _written = True
        with open(SPEC["out"], "w", encoding="utf-8") as out:
            recorder = _recorders.get(item.nodeid)
            json.dump({"test": item.nodeid, "calls": recorder.calls if recorder else []}, out)
