"""Killing a real child process with SIGKILL at a chosen point, deterministically.

A point in mulligan's own code: the child runs Python with one function of a module
wrapped, so that the function's Nth call writes a file and waits instead of running; the
test sees the file and kills the child there (`stopped_at`). A point outside it (a check
running in the box): the test waits for a process whose command line carries a marker
(`process_with`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.terminal import ctrl_c_reaches_it

ROOT = Path(__file__).parents[2]

WRAPPER = """
import importlib, json, sys, time
from pathlib import Path

module_name, attribute, nth, ready, first, code = json.loads(sys.argv[1])
owner = importlib.import_module(module_name)
*path, name = attribute.split(".")
for part in path:
    owner = getattr(owner, part)
real = getattr(owner, name)
calls = []


def stopped(*args, **kwargs):
    calls.append(1)
    if len(calls) == nth:
        exec(first)  # what the call does before it stops (e.g. half of a write)
        Path(ready).write_text(f"{module_name}:{attribute} call {nth}")
        time.sleep(600)
    return real(*args, **kwargs)


setattr(owner, name, stopped)
exec(code)
"""


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "ORT_DISABLE_TELEMETRY": "1", **extra}


def stopped_at(
    point: str,
    nth: int,
    code: str,
    ready: Path,
    env: dict[str, str] | None = None,
    first: str = "",
) -> subprocess.Popen[str]:
    """A child running `code` that now waits at the `nth` call of `point` ("module:name",
    e.g. "pathlib:Path.write_text"), having run `first` there (the call's `args` and
    `kwargs` are at hand); the test fails, with the child's output, if it ends first."""
    module, _, attribute = point.partition(":")
    payload = json.dumps([module, attribute, nth, str(ready), first, code])
    child = subprocess.Popen(
        [sys.executable, "-c", WRAPPER, payload],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or environment(),
        cwd=ready.parent,
        preexec_fn=ctrl_c_reaches_it,  # a test may stop it with Ctrl-C rather than a kill
    )
    deadline = time.monotonic() + 180
    while not ready.exists():
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            out, err = child.communicate()
            raise AssertionError(f"the child never reached {point} call {nth}:\n{out}\n{err}")
        time.sleep(0.05)
    return child


def killed(child: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGKILL, as `kill -9` sends it; what the child had printed."""
    os.kill(child.pid, signal.SIGKILL)
    out, err = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    return out, err


def process_with(marker: str) -> int | None:
    """The id of a process on this machine whose command line holds `marker`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in command and entry.name != str(os.getpid()):
            return int(entry.name)
    return None


def processes_titled(start: bytes) -> list[int]:
    """The ids of the processes on this machine whose command line starts with `start`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            title = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if title.startswith(start):
            found.append(int(entry.name))
    return found


def parent_of(pid: int) -> int:
    """The parent of process `pid` (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])


def descends_from_us(pid: int) -> bool:
    """Process `pid` is a child of this process, or a child of one, and so on."""
    while pid > 1:
        pid = parent_of(pid)
        if pid == os.getpid():
            return True
    return False


def cli_code(argv: list[str]) -> str:
    """`code` for `stopped_at` that runs `mulligan ARGV` as the command line does."""
    return f"from mulligan.cli import main\nsys.exit(main({json.dumps(argv)}))"
