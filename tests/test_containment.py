"""Attacks on the box and on code scoring (issue 10): each must fail, and the host must not change.

Written as a hostile candidate would: forged `python_tests` verdicts, escapes from the box
(network, host directories, other processes, secrets), descendants that outlive the run,
floods of output, workspace links that point out of the workspace, and resource hogs.
Every test also checks that the attack really ran (a marker it prints), so a box that runs
nothing cannot pass. No test leaves a process or a file behind: fixtures kill and remove
whatever an attack planted, even when the defence is missing.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from mulligan import sandbox
from mulligan.actor import ToolRegistry, build_tools
from mulligan.evaluator import Evaluator
from mulligan.sandbox import Limits
from mulligan.schema import (
    Attempt,
    Check,
    CheckResult,
    CommandCheck,
    FileCheck,
    PythonTestsCheck,
    Task,
    ToolCall,
)

REPO = Path(__file__).resolve().parents[1]
IS_ROOT = os.geteuid() == 0


# ---------------------------------------------------------------- helpers


def token() -> str:
    return secrets.token_hex(6)


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}```\n"


def run_check(check: Check, answer: str, workspace: Path | None = None) -> CheckResult:
    task = Task(id="t", prompt="p", checks=[check])
    return Evaluator().evaluate(task, Attempt(task_id="t", answer=answer), workspace).checks[0]


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


# ---------------------------------------------------------------- 7. the level of containment


def test_containment_level_is_namespaces_with_nothing_missing() -> None:
    level = sandbox.containment()
    assert level.level == "namespaces", level.missing
    assert level.missing == []


# ---------------------------------------------------------------- 1. forged verdicts

ADD_CHECK = (
    "def check(candidate):\n"
    "    assert candidate(1, 2) == 3\n"
    "    assert candidate(2, 2) == 4\n"
    "    assert candidate(5, -2) == 3\n"
)
ADD_ASSERTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(5, -2) == 3\n"
STYLES = {
    "check_function": {"tests": ADD_CHECK, "entry_point": "add"},
    "plain_asserts": {"tests": ADD_ASSERTS},
}
CORRECT_ADD = "def add(a, b):\n    return a + b\n"

# What a failed check's detail may say about a forged run: loose on purpose.
EXPLAINS = ("exit", "kill", "signal", "report", "timed out", "interrupt", "fail", "error", "died")


def assert_explains(detail: str) -> None:
    assert detail.strip(), "the failed check gives no detail"
    assert any(word in detail.lower() for word in EXPLAINS), detail


# Every candidate is wrong (add returns 0 or nothing) and tries to make the check pass anyway.
FORGERIES = {
    "os_exit_in_default_argument": "import os\ndef add(a, b, _=os._exit(0)):\n    return 0\n",
    "os_exit_in_return_annotation": "import os\ndef add(a, b) -> os._exit(0):\n    return 0\n",
    "os_exit_in_class_body": "import os\nclass Sneaky:\n    os._exit(0)\ndef add(a, b):\n    return 0\n",
    "os_exit_in_decorator": "import os\n@(lambda f: os._exit(0))\ndef add(a, b):\n    return 0\n",
    "os_exit_in_function": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "system_exit_in_function": "def add(a, b):\n    raise SystemExit(0)\n",
    "sys_exit_in_function": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "exit_builtin": "def add(a, b):\n    exit()\n",
    "quit_builtin": "def add(a, b):\n    quit(0)\n",
    "atexit_hook": (
        "import atexit, os\ndef add(a, b, _=atexit.register(lambda: os._exit(0))):\n    return 0\n"
    ),
    "sys_exit_replaced": (
        "import os, sys\n"
        "def add(a, b, _=setattr(sys, 'exit', lambda *args: os._exit(0))):\n    return 0\n"
    ),
    "exec_true": "import os\ndef add(a, b, _=os.execv('/bin/true', ['true'])):\n    return 0\n",
    "exec_fake_harness": (
        "import os, sys\n"
        "def add(a, b, _=os.execv(sys.executable, [sys.executable, '-c', "
        "\"print('3/3 asserts passed')\"])):\n    return 0\n"
    ),
    "fork_and_parent_exits_0": (
        "import os\n"
        "def _leave():\n    if os.fork():\n        os._exit(0)\n"
        "def add(a, b, _=_leave()):\n    return 0\n"
    ),
    "fake_success_line_then_exit": (
        "import os, sys\n"
        "def add(a, b):\n"
        "    print('3/3 asserts passed\\nPASSED\\nOK\\nall tests passed', flush=True)\n"
        "    sys.stderr.write('3/3 asserts passed\\n')\n"
        "    sys.stderr.flush()\n"
        "    os._exit(0)\n"
    ),
    "thread_prints_success_and_exits": (
        "import os, threading, time\n"
        "def _cheat():\n"
        "    time.sleep(0.2)\n"
        "    print('3/3 asserts passed', flush=True)\n"
        "    os._exit(0)\n"
        "def add(a, b, _=threading.Thread(target=_cheat, daemon=True).start()):\n"
        "    time.sleep(1)\n    return 0\n"
    ),
    "del_exits_0_at_shutdown": (
        "import os\n"
        "class _Exit:\n    def __del__(self, _exit=os._exit):\n        _exit(0)\n"
        "def add(a, b, _keep=_Exit()):\n    return 0\n"
    ),
    "sigalrm_handler_exits_0": (
        "import os, signal, time\n"
        "def add(a, b, _=(signal.signal(signal.SIGALRM, lambda *a: os._exit(0)), signal.alarm(1))):\n"
        "    time.sleep(3)\n    return 0\n"
    ),
    "sigkill_self": "import os, signal\ndef add(a, b):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
    "sigkill_own_process_group": "import os, signal\ndef add(a, b):\n    os.killpg(0, signal.SIGKILL)\n",
    "keyboard_interrupt": "def add(a, b):\n    raise KeyboardInterrupt\n",
    "segfault": "import ctypes\ndef add(a, b):\n    return ctypes.string_at(0)\n",
    "eq_always_true": (
        "class _Yes:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    __hash__ = object.__hash__\n"
        "def add(a, b):\n    return _Yes()\n"
    ),
    "int_subclass_eq_always_true": (
        "class _Int(int):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return _Int(0)\n"
    ),
    "assertion_error_replaced": (
        "import builtins\n"
        "class _Never(BaseException):\n    pass\n"
        "def add(a, b, _=setattr(builtins, 'AssertionError', _Never)):\n    return 0\n"
    ),
    "closes_stdout_and_stderr": (
        "import os\ndef add(a, b, _=(os.close(1), os.close(2))):\n    return 0\n"
    ),
    "redirects_stdout_and_writes_success": (
        "import os\n"
        "def _swap():\n"
        "    real = os.dup(1)\n"
        "    null = os.open(os.devnull, os.O_WRONLY)\n"
        "    os.dup2(null, 1)\n    os.dup2(null, 2)\n"
        "    os.write(real, b'3/3 asserts passed\\n')\n"
        "def add(a, b, _=_swap()):\n    return 0\n"
    ),
    "closes_every_descriptor_then_exits_0": (
        "import os\ndef add(a, b):\n    os.closerange(0, 4096)\n    os._exit(0)\n"
    ),
    "rewrites_the_report": (
        "import builtins, os, re, sys\n"
        "def _forge(text):\n"
        "    text = re.sub(r'(\\d+)\\s*/\\s*(\\d+)', r'\\2/\\2', text)\n"
        "    text = re.sub(r'(?i)(\"?fail\\w*\"?\\s*[:=]\\s*)\\d+', r'\\g<1>0', text)\n"
        "    for bad, good in (('FAILED', 'PASSED'), ('FAIL', 'PASS'), ('False', 'True'),\n"
        "                      ('false', 'true'), ('ERROR', 'OK')):\n"
        "        text = text.replace(bad, good)\n"
        "    return text\n"
        "class _Out:\n"
        "    def __init__(self, stream):\n        self._stream = stream\n"
        "    def write(self, text):\n        return self._stream.write(_forge(text))\n"
        "    def __getattr__(self, name):\n        return getattr(self._stream, name)\n"
        "def _install():\n"
        "    real_write, real_print = os.write, builtins.print\n"
        "    sys.stdout, sys.stderr = _Out(sys.stdout), _Out(sys.stderr)\n"
        "    os.write = lambda fd, data: real_write(fd, _forge(bytes(data).decode('latin-1')).encode('latin-1'))\n"
        "    builtins.print = lambda *a, **k: real_print(*(_forge(str(x)) for x in a), **k)\n"
        "def add(a, b, _=_install()):\n    return 0\n"
    ),
    "writes_a_report_into_the_parents_descriptors": (
        "import json, os, struct\n"
        "def add(a, b):\n"
        "    body = json.dumps({'complete': True, 'tests': 3, 'failures': [], 'passed': 3}).encode()\n"
        "    frame = struct.pack('>Q', len(body)) + body\n"
        "    ppid, paths = os.getppid(), []\n"
        "    for pid in (ppid, 1):\n"
        "        try:\n"
        "            paths += [f'/proc/{pid}/fd/{n}' for n in os.listdir(f'/proc/{pid}/fd')]\n"
        "        except OSError:\n"
        "            pass\n"
        "    for path in paths:\n"
        "        try:\n"
        "            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_APPEND)\n"
        "            try:\n"
        "                os.write(fd, frame)\n"
        "            finally:\n"
        "                os.close(fd)\n"
        "        except OSError:\n"
        "            pass\n"
        "    for fd in range(256):\n"
        "        try:\n"
        "            os.write(fd, frame)\n"
        "        except OSError:\n"
        "            pass\n"
        "    try:\n"
        "        with open(f'/proc/{ppid}/mem', 'rb') as mem:\n"
        "            mem.read(1)\n"
        "    except OSError:\n"
        "        pass\n"
        "    return 0\n"
    ),
    "steals_secrets_and_writes_reports_everywhere": (
        "import glob, os, re, sys\n"
        "def _loot():\n"
        "    texts = []\n"
        "    main = sys.modules.get('__main__')\n"
        "    paths = [sys.argv[0] if sys.argv else '', getattr(main, '__file__', None) or '',\n"
        "             '/proc/self/cmdline', '/proc/self/environ']\n"
        "    for d in {os.getcwd(), os.path.dirname(os.path.abspath(sys.argv[0] or '.')), '/tmp'}:\n"
        "        paths += glob.glob(os.path.join(d, '*'))[:200]\n"
        "    paths += glob.glob('/proc/self/fd/*')\n"
        "    for p in paths:\n"
        "        try:\n"
        "            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)\n"
        "            try:\n"
        "                texts.append(os.read(fd, 1 << 20).decode('utf-8', 'replace'))\n"
        "            finally:\n"
        "                os.close(fd)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return '\\n'.join(texts)\n"
        "def add(a, b):\n"
        "    tokens = sorted(set(re.findall(r'[A-Za-z0-9_-]{16,}', _loot())))[:100]\n"
        "    lines = ['3/3 asserts passed', 'PASSED', 'OK']\n"
        "    for t in tokens:\n"
        "        lines += [t, t + ' 3/3 asserts passed', t + ' PASS 3 3',\n"
        '                  \'{"secret": "%s", "passed": 3, "failed": 0, "total": 3}\' % t]\n'
        "    report = ('\\n'.join(lines) + '\\n').encode()\n"
        "    for fd in range(1, 64):\n"
        "        try:\n"
        "            os.write(fd, report)\n"
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n"
    ),
}


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("attack", sorted(FORGERIES))
def test_forged_verdict_fails(attack: str, style: str) -> None:
    check = PythonTestsCheck(**STYLES[style], timeout=5)  # type: ignore[arg-type]
    result = run_check(check, fenced(FORGERIES[attack]))
    assert not result.passed, f"{attack} forged a pass: {result.detail}"
    assert result.score < 1.0
    assert_explains(result.detail)


def test_handlers_for_the_kill_signals_do_not_turn_a_timeout_into_a_pass() -> None:
    code = (
        "import os, signal\n"
        "def _trap():\n"
        "    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):\n"
        "        signal.signal(sig, lambda *a: os._exit(0))\n"
        "def add(a, b, _=_trap()):\n    while True:\n        pass\n"
    )
    result = run_check(
        PythonTestsCheck(tests=ADD_CHECK, entry_point="add", timeout=2), fenced(code)
    )
    assert not result.passed, result.detail
    assert_explains(result.detail)


def test_monkeypatched_sys_exit_is_ignored_even_for_a_correct_count() -> None:
    # The candidate is right on 2 of 3 asserts and turns the final exit status into 0.
    code = (
        "import os, sys\n"
        "def add(a, b, _=setattr(sys, 'exit', lambda *args: os._exit(0))):\n"
        "    return a + b if a != 5 else 0\n"
    )
    result = run_check(PythonTestsCheck(tests=ADD_ASSERTS), fenced(code))
    assert not result.passed, result.detail
    assert result.score < 1.0


# Tests that lean on builtins or on modules, and candidates that patch exactly those.
PATCHED_BUILTINS = {
    "abs_patched": (
        "def check(candidate):\n"
        "    assert abs(candidate(3) - 1.5) < 1e-6\n"
        "    assert abs(candidate(5) - 2.5) < 1e-6\n",
        "import builtins\ndef half(x, _=setattr(builtins, 'abs', lambda v: 0)):\n    return 0\n",
    ),
    "isinstance_patched": (
        "def check(candidate):\n"
        "    assert isinstance(candidate(3), float) and str(candidate(3)) == '1.5'\n"
        "    assert isinstance(candidate(5), float) and str(candidate(5)) == '2.5'\n",
        "import builtins\n"
        "def _lie(obj, kind, _real=isinstance):\n"
        "    return True if kind is float else _real(obj, kind)\n"
        "def half(x, _=setattr(builtins, 'isinstance', _lie)):\n"
        "    return str(x / 2)\n",
    ),
    "sys_modules_math_replaced": (
        "def check(candidate):\n"
        "    import math\n"
        "    assert math.isclose(candidate(3), 1.5)\n"
        "    assert math.isclose(candidate(5), 2.5)\n",
        "import sys, types\n"
        "def _plant():\n"
        "    fake = types.ModuleType('math')\n"
        "    fake.isclose = lambda *a, **k: True\n"
        "    sys.modules['math'] = fake\n"
        "def half(x, _=_plant()):\n"
        "    return 0\n",
    ),
}


@pytest.mark.parametrize("attack", sorted(PATCHED_BUILTINS))
def test_monkeypatched_builtin_or_module_fails(attack: str) -> None:
    tests, code = PATCHED_BUILTINS[attack]
    check = PythonTestsCheck(tests=tests, entry_point="half", timeout=5)
    assert run_check(check, fenced("def half(x):\n    return x / 2\n")).passed  # tests are fair
    result = run_check(check, fenced(code))
    assert not result.passed, f"{attack} forged a pass: {result.detail}"
    assert result.score < 1.0


COPY_EXPECTED = (
    "import glob, inspect, linecache, os, re, sys\n"
    "def _sources():\n"
    "    texts = []\n"
    "    main = sys.modules.get('__main__')\n"
    "    paths = [sys.argv[0] if sys.argv else '', getattr(main, '__file__', None) or '',\n"
    "             '/proc/self/cmdline', '/proc/self/environ']\n"
    "    for d in {os.getcwd(), os.path.dirname(os.path.abspath(sys.argv[0] or '.')), '/tmp'}:\n"
    "        paths += glob.glob(os.path.join(d, '**'), recursive=True)[:500]\n"
    "    paths += glob.glob('/proc/self/fd/*') + glob.glob('/proc/*/cmdline')\n"
    "    for p in paths:\n"
    "        try:\n"
    "            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)\n"
    "            try:\n"
    "                texts.append(os.read(fd, 1 << 20).decode('utf-8', 'replace'))\n"
    "            finally:\n"
    "                os.close(fd)\n"
    "        except OSError:\n"
    "            pass\n"
    "    for info in inspect.stack():\n"
    "        texts.extend(info.code_context or [])\n"
    "        try:\n"
    "            texts.append(inspect.getsource(info.frame))\n"
    "        except (OSError, TypeError):\n"
    "            pass\n"
    "    for entry in list(linecache.cache.values()):\n"
    "        try:\n"
    "            texts.append(''.join(entry[2]))\n"
    "        except Exception:\n"
    "            pass\n"
    "    return '\\n'.join(texts)\n"
    "def lookup(x):\n"
    "    pattern = r'\\(\\s*' + re.escape(repr(x)) + r'\\s*\\)\\s*==\\s*(-?\\d+)'\n"
    "    for match in re.finditer(pattern, _sources()):\n"
    "        return int(match.group(1))\n"
    "    return -1\n"
)


@pytest.mark.parametrize("style", ["check_function", "plain_asserts"])
def test_copying_expected_values_from_the_test_source_fails(style: str) -> None:
    expected = {x: 100_000 + secrets.randbelow(900_000) for x in (3, 7, 11)}
    if style == "check_function":
        tests = "def check(candidate):\n" + "".join(
            f"    assert candidate({x}) == {value}\n" for x, value in expected.items()
        )
        check = PythonTestsCheck(tests=tests, entry_point="lookup", timeout=5)
    else:
        tests = "".join(f"assert lookup({x}) == {value}\n" for x, value in expected.items())
        check = PythonTestsCheck(tests=tests, timeout=5)
    result = run_check(check, fenced(COPY_EXPECTED))
    assert not result.passed, f"the candidate read the expected values: {result.detail}"
    assert result.score < 1.0


def test_killing_the_parent_fails_and_the_evaluator_survives() -> None:
    # Run in a separate interpreter: if the attack works, that interpreter dies, not pytest.
    driver = (
        "import json, sys\n"
        "from mulligan.evaluator import Evaluator\n"
        "from mulligan.schema import Attempt, PythonTestsCheck, Task\n"
        "spec = json.loads(sys.argv[1])\n"
        "task = Task(id='t', prompt='p', checks=[PythonTestsCheck(**spec['check'])])\n"
        "v = Evaluator().evaluate(task, Attempt(task_id='t', answer=spec['answer']), None)\n"
        "print(json.dumps({'passed': v.passed, 'detail': v.checks[0].detail}))\n"
    )
    code = (
        "import os, signal\n"
        "def add(a, b):\n"
        "    for sig in (signal.SIGKILL, signal.SIGTERM):\n"
        "        try:\n"
        "            os.kill(os.getppid(), sig)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 0\n"
    )
    spec = {
        "check": {"tests": ADD_CHECK, "entry_point": "add", "timeout": 5},
        "answer": fenced(code),
    }
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", driver, json.dumps(spec)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"the evaluator died ({done.returncode}): {done.stderr[-500:]}"
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    assert not verdict["passed"], verdict
    assert_explains(verdict["detail"])


@pytest.mark.parametrize("style", sorted(STYLES))
def test_correct_candidate_still_passes(style: str) -> None:
    result = run_check(PythonTestsCheck(**STYLES[style]), fenced(CORRECT_ADD))  # type: ignore[arg-type]
    assert result.passed, result.detail
    assert result.score == 1.0


@pytest.mark.parametrize("style", sorted(STYLES))
def test_wrong_candidate_without_tricks_fails(style: str) -> None:
    wrong = "def add(a, b):\n    return a - b\n"
    result = run_check(PythonTestsCheck(**STYLES[style]), fenced(wrong))  # type: ignore[arg-type]
    assert not result.passed and result.score < 1.0
    assert_explains(result.detail)


def test_plain_asserts_with_an_entry_point_and_no_check_function_pass() -> None:
    check = PythonTestsCheck(tests=ADD_ASSERTS, entry_point="add")
    result = run_check(check, fenced(CORRECT_ADD))
    assert result.passed, result.detail
    assert "NameError" not in result.detail
    wrong = run_check(check, fenced("def add(a, b):\n    return 0\n"))
    assert not wrong.passed and "NameError" not in wrong.detail


# ---------------------------------------------------------------- 2. host isolation

CONNECT = """
import socket
print("attempting")
try:
    sock = socket.create_connection(("127.0.0.1", {port}), timeout=3)
    print("CONNECTED", sock.recv(16))
except OSError as exc:
    print("blocked:", type(exc).__name__)
print("interfaces:", sorted(name for _, name in socket.if_nameindex()))
"""


def test_network_is_off_by_default(runner: Runner, workspace: Path) -> None:
    with loopback_listener() as listener:
        output = runner(CONNECT.format(port=listener.port), workspace)
    assert "attempting" in output, output
    assert "CONNECTED" not in output and "blocked:" in output, output
    assert listener.accepted == 0
    assert "interfaces: ['lo']" in output, output  # nothing but a loopback of its own


@pytest.mark.parametrize("run", ["python", "shell"])
def test_network_can_be_allowed(run: str) -> None:
    limits = Limits(network=True)
    with loopback_listener() as listener:
        code = CONNECT.format(port=listener.port)
        if run == "python":
            output = sandbox.run_python(code, limits=limits).stdout
        else:
            output = sandbox.run_shell(python_in_shell(code), limits=limits).stdout
    assert "CONNECTED b'hello'" in output, output
    assert listener.accepted == 1


def test_a_python_tests_candidate_is_boxed_too(host_paths: list[Path]) -> None:
    # The candidate's answer is right only if it reached the network or planted a host file.
    planted = Path("/tmp") / f"mulligan-attack-{token()}"
    host_paths.append(planted)
    with loopback_listener() as listener:
        code = (
            "import socket\n"
            "def add(a, b):\n"
            "    escaped = 0\n"
            "    try:\n"
            f"        socket.create_connection(('127.0.0.1', {listener.port}), timeout=2).close()\n"
            "        escaped += 1\n"
            "    except OSError:\n"
            "        pass\n"
            "    try:\n"
            f"        open({str(planted)!r}, 'w').write('x')\n"
            "    except OSError:\n"
            "        pass\n"
            "    return a + b if escaped else 0\n"
        )
        result = run_check(PythonTestsCheck(tests=ADD_CHECK, entry_point="add"), fenced(code))
    assert not result.passed, result.detail
    assert listener.accepted == 0
    assert not os.path.lexists(planted)


WRITE_EVERYWHERE = """
for path in {paths!r}:
    try:
        with open(path, "w") as handle:
            handle.write("planted")
        print("wrote", path)
    except OSError as exc:
        print("refused", path, type(exc).__name__)
print("done")
"""


def test_writes_to_host_temp_directories_stay_in_the_box(
    runner: Runner, workspace: Path, host_paths: list[Path]
) -> None:
    name = f"mulligan-attack-{token()}"
    host_paths += [Path(d) / name for d in ("/tmp", "/var/tmp", "/dev/shm")]
    output = runner(WRITE_EVERYWHERE.format(paths=[str(p) for p in host_paths]), workspace)
    assert "done" in output, output
    assert [p for p in host_paths if os.path.lexists(p)] == []


def test_writes_outside_the_workspace_fail(
    runner: Runner, workspace: Path, host_paths: list[Path]
) -> None:
    name = f"mulligan-attack-{token()}"
    host_paths += [
        workspace.parent / name,  # next to the workspace
        Path.home() / name,
        REPO / name,  # mulligan's own checkout
        REPO / "tests" / name,
    ]
    output = runner(WRITE_EVERYWHERE.format(paths=[str(p) for p in host_paths]), workspace)
    assert "done" in output, output
    assert [p for p in host_paths if os.path.lexists(p)] == []


@pytest.mark.parametrize("run", ["python_tool", "shell_tool", "command_check"])
def test_the_workspace_is_still_writable(run: str, workspace: Path) -> None:
    # The other side of the coin: a task's own scratch workspace must stay usable.
    name = f"result-{token()}.txt"  # relative: the code runs in the workspace
    output = RUNNERS[run](WRITE_EVERYWHERE.format(paths=[name]), workspace)
    assert f"wrote {name}" in output, output
    assert (workspace / name).read_text() == "planted"


OWN_TEMP = """
import os
for directory in ("/tmp", "/var/tmp"):
    path = os.path.join(directory, {name!r})
    with open(path, "w") as handle:
        handle.write("scratch data")
    print("read back", open(path).read())
    os.unlink(path)
"""


def test_the_box_has_a_writable_temp_directory_of_its_own(
    runner: Runner, workspace: Path, host_paths: list[Path]
) -> None:
    # Programs write to /tmp without asking TMPDIR; the box gives them one, not the host's.
    name = f"mulligan-own-{token()}"
    host_paths += [Path("/tmp") / name, Path("/var/tmp") / name]
    output = runner(OWN_TEMP.format(name=name), workspace)
    assert output.count("read back scratch data") == 2, output
    assert [p for p in host_paths if os.path.lexists(p)] == []


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_a_users_own_workspace_is_read_only_to_the_tools(tool: str, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("mine")
    registry = ToolRegistry.of(
        build_tools([tool], workspace=workspace, scratch_workspace=False),
        approve=lambda call: True,
    )
    code = WRITE_EVERYWHERE.format(paths=["notes.txt", "new.txt"])
    arguments = {"code": code} if tool == "python" else {"command": python_in_shell(code)}
    result = registry.run(ToolCall(id="c", name=tool, arguments=json.dumps(arguments)))
    assert "done" in result.output, result.output
    assert (workspace / "notes.txt").read_text() == "mine"
    assert not (workspace / "new.txt").exists()


READ_BACK = """
import os
for path in {paths!r}:
    try:
        if os.path.isdir(path):
            for name in os.listdir(path):
                print(open(os.path.join(path, name)).read())
        else:
            print(open(path).read())
    except OSError as exc:
        print("refused", path, type(exc).__name__)
print("done")
"""


def test_hidden_paths_are_covered_in_the_box(host_paths: list[Path]) -> None:
    """Answers on the host (datasets, mulligan's memory) that `sandbox.hide` covers stay unread."""
    if not IS_ROOT:
        pytest.skip("needs root to make a world-readable file outside the box's private /tmp")
    secret = f"ANSWER-{token()}"
    answers = Path("/run") / f"mulligan-answers-{token()}.txt"
    directory = Path("/run") / f"mulligan-memory-{token()}"
    host_paths += [answers, directory / "lessons.txt"]
    answers.write_text(secret)
    directory.mkdir()
    (directory / "lessons.txt").write_text(secret)
    try:
        for path in (answers, directory, directory / "lessons.txt"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        code = READ_BACK.format(paths=[str(answers), str(directory)])
        sandbox.hide(answers)
        sandbox.hide(directory)
        output = sandbox.run_python(code).describe()
        assert "done" in output, output
        assert secret not in output, output
    finally:
        with suppress(OSError):
            (directory / "lessons.txt").unlink()
        with suppress(OSError):
            directory.rmdir()


def test_the_api_key_in_mulligan_toml_is_not_readable_in_the_box(host_paths: list[Path]) -> None:
    """A project's mulligan.toml (often world-readable) holds the API key; the box must not read it."""
    from mulligan.config import load_config

    if not IS_ROOT:
        pytest.skip("needs root to make a world-readable file outside the box's private /tmp")
    key = f"sk-{token()}"
    project = Path("/run") / f"mulligan-project-{token()}"
    config = project / "mulligan.toml"
    host_paths.append(config)
    project.mkdir()
    try:
        project.chmod(0o755)
        config.write_text(f'api_key = "{key}"\n')
        config.chmod(0o644)
        loaded = load_config({}, config_path=config)
        assert loaded.endpoint.api_key == key
        code = READ_BACK.format(paths=[str(config)])
        output = sandbox.run_python(code, policy=loaded.policy()).describe()
        assert "done" in output, output
        assert key not in output, output
        # the policy is what covers it: a run without it (proving the attack) reads the key
        assert key in sandbox.run_python(code).describe()
    finally:
        with suppress(OSError):
            config.unlink()
        with suppress(OSError):
            project.rmdir()


PLANT = """
for path in {paths!r}:
    try:
        with open(path, "w") as handle:
            handle.write("hidden tests")
    except OSError:
        pass
print("planted")
"""
LOOK = """
import os
for path in {paths!r}:
    if os.path.exists(path):
        print("SEEN", path)
print("looked")
"""


def test_a_file_planted_by_one_run_is_not_seen_by_the_next(
    runner: Runner, tmp_path: Path, host_paths: list[Path]
) -> None:
    name = f"mulligan-plant-{token()}"
    host_paths += [Path(d) / name for d in ("/tmp", "/var/tmp", "/dev/shm")]
    paths = [str(p) for p in host_paths]
    first, second = tmp_path / "trial1", tmp_path / "trial2"
    first.mkdir()
    second.mkdir()
    assert "planted" in runner(PLANT.format(paths=paths), first)
    output = runner(LOOK.format(paths=paths), second)
    assert "looked" in output, output
    assert "SEEN" not in output, output
    assert [p for p in host_paths if os.path.lexists(p)] == []


FIND_IN_PROC = """
import os
needle = {backwards!r}[::-1].encode()
scanned, found = 0, []
if needle in repr(dict(os.environ)).encode():
    found.append("os.environ")
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    for name in ("cmdline", "environ"):
        try:
            with open(f"/proc/{{entry}}/{{name}}", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        scanned += 1
        if needle in data:
            found.append(f"/proc/{{entry}}/{{name}}")
print("scanned", scanned)
print("FOUND" if found else "clean", found)
"""


@pytest.fixture
def secret_process() -> Iterator[str]:
    """A host process with a secret on its command line (like `--api-key sk-...`)."""
    secret = f"SECRET-{token()}"
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", secret])
    deadline = time.monotonic() + 5  # Popen may return before exec has set the command line
    while not processes_with(secret) and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield secret
    finally:
        process.kill()
        process.wait()


def test_other_processes_are_invisible(
    runner: Runner, workspace: Path, secret_process: str
) -> None:
    assert processes_with(secret_process)  # the host sees it
    output = runner(FIND_IN_PROC.format(backwards=secret_process[::-1]), workspace)
    assert "clean" in output, output
    assert "FOUND" not in output and secret_process not in output, output


def test_secrets_in_the_environment_do_not_reach_the_box(
    runner: Runner, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"sk-{token()}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("MULLIGAN_API_KEY", secret)
    output = runner(FIND_IN_PROC.format(backwards=secret[::-1]), workspace)
    assert "clean" in output, output
    assert "FOUND" not in output and secret not in output, output


READ_SHADOW = """
try:
    print(open("/etc/shadow").read())
except OSError as exc:
    print("refused", type(exc).__name__)
print("done")
"""


def test_root_only_files_stay_unreadable(runner: Runner, workspace: Path) -> None:
    if not IS_ROOT:
        pytest.skip("needs root to know /etc/shadow's content")
    shadow = Path("/etc/shadow").read_text()
    output = runner(READ_SHADOW, workspace)
    assert "done" in output, output
    assert_no_leak(output, shadow)


# ---------------------------------------------------------------- 3. descendants die with the run

DAEMONS = {  # each waits a moment so the daemon has detached before the shell exits
    "setsid_grandchild_keeps_stdout": "setsid sh -c 'sleep {mark}; true' & sleep 0.5; echo started",
    "setsid_grandchild_and_wait": "setsid sh -c 'sleep {mark}; true' & sleep 0.5; echo started; wait",
    "detached_sleeping_daemon": (
        "setsid python3 -c 'import time; time.sleep(10**9)' {mark} "
        "> /dev/null 2>&1 < /dev/null & sleep 0.5; echo started"
    ),
    "daemon_ignoring_signals": (
        "(trap '' HUP INT TERM; exec setsid sleep {mark}) > /dev/null 2>&1 & sleep 0.5; echo started"
    ),
}
DOUBLE_FORK = """
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in (0, 1, 2):
            os.close(fd)
        os.execv("/bin/sleep", ["sleep", "{mark}"])
    os._exit(0)
os.wait()
print("started")
"""


@pytest.mark.timeout(40)
@pytest.mark.parametrize("attack", sorted(DAEMONS))
def test_shell_daemon_is_killed_with_the_run(attack: str, marker: str) -> None:
    result = sandbox.run_shell(DAEMONS[attack].format(mark=marker), limits=Limits(timeout=2))
    assert "started" in result.stdout, result.describe()
    assert survivors(marker) == []


@pytest.mark.timeout(40)
def test_double_fork_daemon_is_killed_with_the_run(marker: str) -> None:
    result = sandbox.run_python(DOUBLE_FORK.format(mark=marker), limits=Limits(timeout=2))
    assert "started" in result.stdout, result.describe()
    assert survivors(marker) == []


@pytest.mark.timeout(40)
def test_daemon_started_by_a_command_check_is_killed(marker: str, workspace: Path) -> None:
    command = DAEMONS["setsid_grandchild_keeps_stdout"].format(mark=marker)
    result = run_check(CommandCheck(command=command, timeout=2), "", workspace)
    assert "started" in result.detail, result.detail
    assert survivors(marker) == []


@pytest.mark.timeout(40)
def test_daemon_started_by_a_candidate_is_killed(marker: str) -> None:
    code = (
        "import subprocess\n"
        "def add(a, b, _=subprocess.Popen(['setsid', 'sleep', '" + marker + "'], "
        "start_new_session=True)):\n"
        "    return a + b\n"
    )
    result = run_check(
        PythonTestsCheck(tests=ADD_CHECK, entry_point="add", timeout=2), fenced(code)
    )
    assert result.detail  # whatever the verdict, the daemon must not outlive the check
    assert survivors(marker) == []


# ---------------------------------------------------------------- 4. bounded output

FLOOD_DRIVER = r"""
import json, os, resource, sys, threading, time

peak = [0]  # the largest resident size seen while the flood runs


def watchdog():  # never let a missing defence eat the shared machine's memory
    while True:
        with open("/proc/self/status") as status:
            rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        peak[0] = max(peak[0], rss)
        if rss > 700 * 1024:
            print(json.dumps({"aborted_at_kib": rss}), flush=True)
            os._exit(3)
        time.sleep(0.02)

threading.Thread(target=watchdog, daemon=True).start()
from mulligan import sandbox

FLOOD = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n    sys.stderr.write('y' * 65536)\n"
limits = sandbox.Limits(timeout=2)
if sys.argv[1] == "run_python":
    r = sandbox.run_python(FLOOD, limits=limits)
    report = {"stdout_chars": len(r.stdout), "stderr_chars": len(r.stderr),
              "stdout_dropped": getattr(r, "stdout_dropped", None),
              "stderr_dropped": getattr(r, "stderr_dropped", None), "cap": limits.output_chars}
else:
    from mulligan.evaluator import Evaluator
    from mulligan.schema import Attempt, PythonTestsCheck, Task
    candidate = "```python\nimport sys\ndef add(a, b):\n    while True:\n        print('x' * 65536)\n```"
    task = Task(id="t", prompt="p", checks=[PythonTestsCheck(tests="assert add(1, 2) == 3", timeout=2)])
    v = Evaluator().evaluate(task, Attempt(task_id="t", answer=candidate), None)
    report = {"passed": v.passed, "detail_chars": len(v.checks[0].detail)}
report["peak_kib"] = max(peak[0], 1)
print(json.dumps(report))
"""


def flood(mode: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", FLOOD_DRIVER, mode],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert "aborted_at_kib" not in report, f"output filled mulligan's memory: {report}"
    assert done.returncode == 0, done.stderr[-1000:]
    return report


@pytest.mark.timeout(60)
def test_endless_output_is_capped_and_counted_not_held_in_memory() -> None:
    report = flood("run_python")
    assert report["peak_kib"] is not None and report["peak_kib"] < 300 * 1024, report
    cap = report["cap"]
    assert isinstance(cap, int)
    assert report["stdout_chars"] <= cap + 200 and report["stderr_chars"] <= cap + 200, report
    assert report["stdout_dropped"] and report["stdout_dropped"] > 0, report
    assert report["stderr_dropped"] and report["stderr_dropped"] > 0, report


@pytest.mark.timeout(60)
def test_endless_output_from_a_candidate_does_not_fill_the_evaluator() -> None:
    report = flood("python_tests")
    assert report["passed"] is False
    assert report["peak_kib"] is not None and report["peak_kib"] < 300 * 1024, report
    assert isinstance(report["detail_chars"], int) and report["detail_chars"] < 50_000, report


# ---------------------------------------------------------------- 5. checks read only inside the workspace


def assert_no_leak(text: str, secret_content: str) -> None:
    for line in secret_content.splitlines():
        if len(line.strip()) >= 8:
            assert line.strip() not in text, "a secret line reached the output"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace with a file the candidate must not get at."""
    directory = tmp_path / "outside"
    directory.mkdir()
    secret = f"SECRET_{token()}"
    (directory / "answer.txt").write_text(f"{secret}\n")
    (directory / "solution.py").write_text(f"def double(x):\n    return 2 * x\n{secret}\n")
    return directory


def secret_in(outside: Path) -> str:
    return (outside / "answer.txt").read_text().strip()


def test_file_check_does_not_follow_a_symlink_to_a_root_only_file(workspace: Path) -> None:
    if not IS_ROOT:
        pytest.skip("needs root to read /etc/shadow")
    shadow = Path("/etc/shadow").read_text()
    (workspace / "answer.txt").symlink_to("/etc/shadow")
    for check in (
        FileCheck(path="answer.txt"),
        FileCheck(path="answer.txt", matches=r"^root:"),
        FileCheck(path="answer.txt", contains="root:"),
    ):
        result = run_check(check, "", workspace)
        assert not result.passed, result.detail
        assert_no_leak(result.detail, shadow)


def test_file_check_does_not_follow_a_symlink_out_of_the_workspace(
    workspace: Path, outside: Path
) -> None:
    (workspace / "answer.txt").symlink_to(outside / "answer.txt")
    for check in (FileCheck(path="answer.txt"), FileCheck(path="answer.txt", matches="SECRET_")):
        result = run_check(check, "", workspace)
        assert not result.passed, result.detail
        assert secret_in(outside) not in result.detail


def test_file_check_does_not_follow_a_symlinked_parent_directory(
    workspace: Path, outside: Path
) -> None:
    (workspace / "sub").symlink_to(outside, target_is_directory=True)
    result = run_check(FileCheck(path="sub/answer.txt", matches="SECRET_"), "", workspace)
    assert not result.passed, result.detail
    assert secret_in(outside) not in result.detail


def test_file_check_does_not_read_a_hard_link_to_a_root_only_file(workspace: Path) -> None:
    if not IS_ROOT:
        pytest.skip("needs root to read /etc/shadow")
    shadow = Path("/etc/shadow").read_text()
    planted = sandbox.run_shell(
        "ln /etc/shadow answer.txt; ln -s /etc/shadow link.txt; echo planted",
        cwd=workspace,
        writable=True,
    )
    assert "planted" in planted.stdout, planted.describe()
    read_file = ToolRegistry.of(build_tools(["read_file"], workspace=workspace))
    for path in ("answer.txt", "link.txt"):
        result = run_check(FileCheck(path=path, matches=r"^root:"), "", workspace)
        assert not result.passed, result.detail
        assert_no_leak(result.detail, shadow)
        call = ToolCall(id="c", name="read_file", arguments=json.dumps({"path": path}))
        assert_no_leak(read_file.run(call).output, shadow)


def test_python_tests_file_does_not_follow_a_symlink_out_of_the_workspace(
    workspace: Path, outside: Path
) -> None:
    (workspace / "solution.py").symlink_to(outside / "solution.py")
    check = PythonTestsCheck(tests="assert double(4) == 8", file="solution.py")
    result = run_check(check, "done", workspace)
    assert not result.passed, result.detail
    assert secret_in(outside) not in result.detail


def test_python_tests_file_does_not_follow_a_symlinked_parent_directory(
    workspace: Path, outside: Path
) -> None:
    (workspace / "pkg").symlink_to(outside, target_is_directory=True)
    check = PythonTestsCheck(tests="assert double(4) == 8", file="pkg/solution.py")
    result = run_check(check, "done", workspace)
    assert not result.passed, result.detail
    assert secret_in(outside) not in result.detail


def test_python_tests_file_does_not_read_a_root_only_file(workspace: Path) -> None:
    if not IS_ROOT:
        pytest.skip("needs root to read /etc/shadow")
    shadow = Path("/etc/shadow").read_text()
    (workspace / "solution.py").symlink_to("/etc/shadow")
    check = PythonTestsCheck(tests="assert double(4) == 8", file="solution.py")
    result = run_check(check, "done", workspace)
    assert not result.passed, result.detail
    assert_no_leak(result.detail, shadow)


def run_in_thread(action: Callable[[], object], fifo: Path) -> object:
    """Run `action`; if it blocks on the FIFO, unblock it (open the FIFO's other end) and say so."""
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(action()), daemon=True)
    thread.start()
    thread.join(timeout=10)
    if thread.is_alive():
        with suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=5)
        return "HUNG"
    return outcome[0] if outcome else None


def plant_fifos(workspace: Path) -> None:
    planted = sandbox.run_python(
        "import os\nos.mkfifo('answer.txt')\nos.mkfifo('solution.py')\nprint('planted')",
        cwd=workspace,
        writable=True,
    )
    assert "planted" in planted.stdout, planted.describe()


def test_a_fifo_planted_in_the_workspace_does_not_hang_the_checks(workspace: Path) -> None:
    plant_fifos(workspace)
    file_check = run_in_thread(
        lambda: run_check(FileCheck(path="answer.txt", contains="x"), "", workspace),
        workspace / "answer.txt",
    )
    assert file_check != "HUNG" and isinstance(file_check, CheckResult)
    assert not file_check.passed
    tests_check = run_in_thread(
        lambda: run_check(
            PythonTestsCheck(tests="assert double(4) == 8", file="solution.py"), "done", workspace
        ),
        workspace / "solution.py",
    )
    assert tests_check != "HUNG" and isinstance(tests_check, CheckResult)
    assert not tests_check.passed


def test_a_fifo_planted_in_the_workspace_does_not_hang_read_file(workspace: Path) -> None:
    plant_fifos(workspace)
    registry = ToolRegistry.of(build_tools(["read_file"], workspace=workspace))
    call = ToolCall(id="c", name="read_file", arguments=json.dumps({"path": "answer.txt"}))
    assert run_in_thread(lambda: registry.run(call), workspace / "answer.txt") != "HUNG"


def test_python_tests_file_inside_the_workspace_still_works(workspace: Path) -> None:
    (workspace / "solution.py").write_text("def double(x):\n    return 2 * x\n")
    check = PythonTestsCheck(tests="assert double(4) == 8", file="solution.py")
    assert run_check(check, "done", workspace).passed


# ---------------------------------------------------------------- 6. resource limits


@pytest.mark.timeout(40)
def test_shell_fork_bomb_is_contained(marker: str) -> None:
    bomb = f": {marker}; echo started; bomb() {{ bomb | bomb & }}; bomb"
    result = sandbox.run_shell(bomb, limits=Limits(timeout=3, processes=16))
    assert "started" in result.stdout, result.describe()
    assert survivors(marker) == []
    assert sandbox.run_python("print(1)").stdout.strip() == "1"


@pytest.mark.timeout(40)
def test_fork_bomb_that_escapes_its_session_is_contained(marker: str) -> None:
    code = (
        "import os, sys\n"
        "print('started', flush=True)\n"
        "while True:\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            os.setsid()\n"
        "            os.execv(sys.executable, [sys.executable, '-c', "
        "'import time; time.sleep(10**6)', '" + marker + "'])\n"
        "    except OSError:\n"
        "        pass\n"
    )
    result = sandbox.run_python(code, limits=Limits(timeout=3, processes=16))
    assert "started" in result.stdout, result.describe()
    assert survivors(marker) == []
    assert sandbox.run_python("print(1)").stdout.strip() == "1"


def test_growing_memory_hog_is_stopped() -> None:
    code = (
        "print('started', flush=True)\nhog = []\nwhile True:\n    hog.append(bytearray(32 << 20))\n"
    )
    result = sandbox.run_python(code, limits=Limits(timeout=20, memory_bytes=256 << 20))
    assert "started" in result.stdout, result.describe()
    assert not result.ok and not result.timed_out, result.describe()


HUGE_FILE = """
import os
print("started", flush=True)
with open({path!r}, "wb") as handle:
    for _ in range(64):
        handle.write(b"x" * (1 << 20))
        handle.flush()
print("WROTE ALL")
"""


def test_huge_file_in_the_workspace_is_cut_at_the_limit(workspace: Path) -> None:
    target = workspace / "big.bin"
    limits = Limits(file_bytes=4 << 20)
    result = sandbox.run_python(
        HUGE_FILE.format(path=str(target)), cwd=workspace, writable=True, limits=limits
    )
    assert "started" in result.stdout, result.describe()
    assert "WROTE ALL" not in result.stdout and not result.ok
    assert not target.exists() or target.stat().st_size <= limits.file_bytes


@pytest.mark.parametrize("directory", ["/tmp", "/dev/shm"])
def test_huge_file_in_a_temp_directory_is_cut_and_stays_in_the_box(
    directory: str, host_paths: list[Path]
) -> None:
    target = Path(directory) / f"mulligan-big-{token()}"
    host_paths.append(target)
    result = sandbox.run_python(
        HUGE_FILE.format(path=str(target)), limits=Limits(file_bytes=4 << 20)
    )
    assert "started" in result.stdout, result.describe()
    assert "WROTE ALL" not in result.stdout and not result.ok
    assert not os.path.lexists(target)


TREE_HOG = """
import os, time
r, w = os.pipe()
children = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        try:
            block = b"x" * (150 << 20)
        except MemoryError:
            os._exit(1)
        os.write(w, b"%d " % os.getpid())
        time.sleep(60)
        os._exit(0)
    children.append(pid)
print("started", flush=True)
time.sleep(3)
os.set_blocking(r, False)
try:
    holders = {int(line) for line in os.read(r, 4096).split()}
except BlockingIOError:
    holders = set()
alive = sum(1 for pid in holders if os.waitpid(pid, os.WNOHANG) == (0, 0))
print("alive holding", alive, flush=True)
"""
# A child counts once its 150 MB are allocated: at the limit, the kernel may stall the
# others in the allocation (alive, holding less) instead of killing them.


@pytest.mark.timeout(60)
def test_memory_limit_holds_for_the_whole_process_tree() -> None:
    # Six processes of 150 MB each: each fits the per-process limit, together they do not.
    limits = Limits(timeout=10, memory_bytes=256 << 20)
    result = sandbox.run_python(TREE_HOG, limits=limits)
    assert "started" in result.stdout, result.describe()
    said = [line for line in result.stdout.splitlines() if line.startswith("alive holding")]
    if said:
        alive = int(said[0].split()[-1])
        assert alive * (150 << 20) <= limits.memory_bytes, result.describe()
    else:  # the whole tree was killed for it: also contained
        assert not result.ok, result.describe()


FILL_TEMP = """
import os
print("started", flush=True)
written = 0
try:
    os.makedirs({directory!r}, exist_ok=True)
    for i in range(48):
        with open(os.path.join({directory!r}, f"fill-{{i}}"), "wb") as handle:
            for _ in range(8):
                handle.write(b"x" * (1 << 20))
        written += 8
except OSError as exc:
    print("stopped:", type(exc).__name__, flush=True)
print("written MB", written, flush=True)
"""


@pytest.fixture
def host_directory() -> Iterator[list[Path]]:
    import shutil

    made: list[Path] = []
    yield made
    for directory in made:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("base", ["/tmp", "/dev/shm"])
def test_filling_a_memory_backed_temp_directory_is_stopped(
    base: str, host_directory: list[Path]
) -> None:
    # 384 MB in 8 MB files: each file is under the file-size limit; the box's /tmp lives in memory.
    directory = Path(base) / f"mulligan-fill-{token()}"
    host_directory.append(directory)
    limits = Limits(timeout=20, memory_bytes=128 << 20)
    result = sandbox.run_python(FILL_TEMP.format(directory=str(directory)), limits=limits)
    assert "started" in result.stdout, result.describe()
    assert "written MB 384" not in result.stdout, result.describe()
    assert not directory.exists()


# ---------------------------------------------------------------- shadowing what the tests call


def test_a_candidate_defining_a_builtin_the_tests_use_cannot_fool_them() -> None:
    cheat = "def abs(x):\n    return 0\n\ndef half(x):\n    return 0.0\n"
    tests = "assert abs(half(3.0) - 1.5) < 1e-9\n"
    result = run_check(PythonTestsCheck(tests=tests, entry_point="half"), fenced(cheat))
    assert not result.passed, result.detail
    honest = "def half(x):\n    return x / 2\n"
    assert run_check(PythonTestsCheck(tests=tests, entry_point="half"), fenced(honest)).passed


@pytest.mark.parametrize("task_id", ["HumanEval/38", "HumanEval/50"])
def test_a_candidate_replacing_the_tasks_own_helper_cannot_fool_its_tests(task_id: str) -> None:
    """decode(encode(s)) == s holds for identity functions too, if the tests used the
    candidate's encoder: they must use the task's own."""
    from mulligan.tasks.suites import load_suite, select

    task = select(load_suite("humaneval").tasks, ids=[task_id])[0]
    entry = str(task.metadata["entry_point"])
    helper = "encode_cyclic" if task_id.endswith("38") else "encode_shift"
    cheat = f"def {helper}(s):\n    return s\n\ndef {entry}(s):\n    return s\n"
    verdict = Evaluator().evaluate(task, Attempt(task_id=task.id, answer=fenced(cheat)))
    assert not verdict.checks[-1].passed, verdict.checks[-1].detail
    canonical = task.metadata["signature_prompt"] + task.metadata["canonical_solution"]
    honest = Evaluator().evaluate(task, Attempt(task_id=task.id, answer=fenced(canonical)))
    assert honest.passed, [c.detail for c in honest.checks]
