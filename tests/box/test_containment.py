"""Attacks on the box: the containment level, descendants that outlive the run, floods of
output, and shadowing what the tests call; each must fail without harming the host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mulligan import sandbox
from mulligan.evaluator import Evaluator
from mulligan.sandbox import Limits
from mulligan.schema import (
    Attempt,
    CommandCheck,
    PythonTestsCheck,
)
from tests.helpers.boxing import (
    REPO,
    fenced,
    marker,
    run_check,
    survivors,
    workspace,
)
from tests.helpers.forgeries import ADD_CHECK

__all__ = ["marker", "workspace"]  # fixtures from tests/helpers/boxing.py


# ---------------------------------------------------------------- 7. the level of containment


def test_containment_level_is_namespaces_with_nothing_missing() -> None:
    level = sandbox.containment()
    assert level.level == "namespaces", level.missing
    assert level.missing == []


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
