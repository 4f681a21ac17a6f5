"""What the box's attack tests share (tests/box/test_containment.py and its neighbours): running
code through every way into the box, markers for the processes an attack starts, and the
fixtures that kill and remove whatever an attack planted, even when the defence is missing."""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from mulligan import sandbox
from mulligan.actor import ToolRegistry, build_tools
from mulligan.evaluator import Evaluator
from mulligan.schema import (
    Attempt,
    Check,
    CheckResult,
    CommandCheck,
    Task,
    ToolCall,
)

REPO = Path(__file__).resolve().parents[2]
IS_ROOT = os.geteuid() == 0


# ---------------------------------------------------------------- helpers


def token() -> str:
    return secrets.token_hex(6)


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}```\n"


def run_check(check: Check, answer: str, workspace: Path | None = None) -> CheckResult:
    task = Task(id="t", prompt="p", checks=[check])
    return Evaluator().evaluate(task, Attempt(task_id="t", answer=answer), workspace).checks[0]


def assert_no_leak(text: str, secret_content: str) -> None:
    for line in secret_content.splitlines():
        if len(line.strip()) >= 8:
            assert line.strip() not in text, "a secret line reached the output"


def python_in_shell(code: str) -> str:
    """A shell command that runs `code` with the system python3 (no quoting trouble)."""
    encoded = base64.b64encode(code.encode()).decode()
    return f"python3 -c 'import base64; exec(base64.b64decode(\"{encoded}\"))'"


def processes_with(marker: str) -> list[int]:
    """Host processes whose command line contains `marker` (zombies have none, so don't count)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def survivors(marker: str, grace: float = 2.0) -> list[int]:
    """Processes with `marker` still alive after a short grace for the kernel to finish kills."""
    deadline = time.monotonic() + grace
    found = processes_with(marker)
    while found and time.monotonic() < deadline:
        time.sleep(0.05)
        found = processes_with(marker)
    return found


def kill_marked(marker: str) -> None:
    pids = processes_with(marker)
    for pid in pids:
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(0.05)
    for pid in pids:  # the test process may have adopted them (the box can make it a subreaper)
        with suppress(OSError):
            os.waitpid(pid, os.WNOHANG)


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique number, usable as a `sleep` duration, that tags an attack's processes."""
    mark = str(700_000_000 + secrets.randbelow(99_999_999))
    yield mark
    kill_marked(mark)


@pytest.fixture
def host_paths() -> Iterator[list[Path]]:
    """Host paths an attack may plant; whatever appears is removed afterwards."""
    planted: list[Path] = []
    yield planted
    for path in planted:
        with suppress(OSError):
            path.unlink()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


class Listener:
    def __init__(self, port: int) -> None:
        self.port = port
        self.accepted = 0


@contextmanager
def loopback_listener() -> Iterator[Listener]:
    """A TCP server on 127.0.0.1 that counts connections (greets each with b'hello')."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.1)
    listener = Listener(server.getsockname()[1])
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            listener.accepted += 1
            with conn, suppress(OSError):
                conn.sendall(b"hello")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        stop.set()
        thread.join(timeout=2)
        server.close()


# Four ways model-written code reaches the box; each returns the text the model would see.
Runner = Callable[[str, Path], str]


def via_run_python(code: str, ws: Path) -> str:
    return sandbox.run_python(code).describe()


def via_run_shell(code: str, ws: Path) -> str:
    return sandbox.run_shell(python_in_shell(code)).describe()


def via_python_tool(code: str, ws: Path) -> str:
    registry = ToolRegistry.of(build_tools(["python"], workspace=ws, scratch_workspace=True))
    result = registry.run(ToolCall(id="c", name="python", arguments=json.dumps({"code": code})))
    assert result.status == "ok", result.output
    return result.output


def via_shell_tool(code: str, ws: Path) -> str:
    tools = build_tools(["shell"], workspace=ws, scratch_workspace=True)
    registry = ToolRegistry.of(tools, approve=lambda call: True)
    arguments = json.dumps({"command": python_in_shell(code)})
    result = registry.run(ToolCall(id="c", name="shell", arguments=arguments))
    assert result.status == "ok", result.output
    return result.output


def via_command_check(code: str, ws: Path) -> str:
    return run_check(CommandCheck(command=python_in_shell(code), timeout=10), "", ws).detail


RUNNERS: dict[str, Runner] = {
    "run_python": via_run_python,
    "run_shell": via_run_shell,
    "python_tool": via_python_tool,
    "shell_tool": via_shell_tool,
    "command_check": via_command_check,
}


@pytest.fixture(params=sorted(RUNNERS))
def runner(request: pytest.FixtureRequest) -> Runner:
    return RUNNERS[request.param]
