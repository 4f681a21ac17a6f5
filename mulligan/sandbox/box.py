"""Running model-written code in the box: `run_python`, `run_shell`, `run_tests`."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import random
import stat
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mulligan.errors import UserError
from mulligan.sandbox import processes
from mulligan.sandbox.levels import containment
from mulligan.sandbox.marked import marked_directory
from mulligan.sandbox.plan import ARGV, make_plan
from mulligan.sandbox.policy import Policy, effective, home, out_of_reach
from mulligan.sandbox.processes import SANDBOX_UIDS, dropping_privileges, give_to, limiter
from mulligan.sandbox.results import Capped, Limits, RunResult, pump

log = logging.getLogger("mulligan")

KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
REPORT_BYTES = 1 << 20
HARNESS = Path(__file__).parents[1] / "evaluator" / "harness.py"
DEFAULT_LIMITS = Limits()
SCRATCH = "mulligan-sandbox-"
"""What a run's scratch directory is named in TMPDIR (marked as this process's: marked.py)."""


FROM_THE_WORKING_DIRECTORY = (
    "import sys; sys.path.insert(0, ''); sys.argv[:] = sys.argv[1:]; __file__ = sys.argv[0]; "
    "exec(compile(open(__file__, encoding='utf-8').read(), __file__, 'exec'))"
)
"""Runs the script as `python -c` would in `cwd`: the working directory's own modules import
(`-I` keeps the host's PYTHONPATH and user site out, and with them the script's directory)."""


def run_python(
    code: str,
    *,
    cwd: str | Path | None = None,
    writable: bool = False,
    limits: Limits = DEFAULT_LIMITS,
    policy: Policy | None = None,
) -> RunResult:
    """Run Python source in the box; `cwd` defaults to a fresh scratch directory.

    `writable=True` lets the code write in `cwd` (as root: hands it over to the run's user),
    so pass it only for directories mulligan made, never for a user's own directory.
    """
    with marked_directory(SCRATCH) as scratch:
        script = scratch / "main.py"
        script.write_text(code, encoding="utf-8")
        argv = [python_for_child(policy), "-I", "-B", "-c", FROM_THE_WORKING_DIRECTORY, str(script)]
        return _run(argv, str(scratch), cwd, writable, limits, b"", policy)


def run_shell(
    command: str,
    *,
    cwd: str | Path | None = None,
    writable: bool = False,
    limits: Limits = DEFAULT_LIMITS,
    policy: Policy | None = None,
) -> RunResult:
    """Run a shell command in the box, like `run_python`."""
    with marked_directory(SCRATCH) as scratch:
        argv = ["/bin/sh", "-c", command]
        return _run(argv, str(scratch), cwd, writable, limits, b"", policy)


def run_tests(
    candidate: str,
    tests: str,
    entry_point: str | None,
    prelude: str,
    limits: Limits,
    reveal: bool = True,
    policy: Policy | None = None,
) -> RunResult:
    """Run `tests` against `candidate` in the two-process harness; `report` holds its verdict.
    Without `reveal`, failures name tests by number, never by their source."""
    frames = _frame({"candidate": candidate, "prelude": prelude}) + _frame(
        {"tests": tests, "entry_point": entry_point, "prelude": prelude, "reveal": reveal}
    )
    with marked_directory(SCRATCH) as scratch:
        script = scratch / "harness.py"
        script.write_text(HARNESS.read_text())
        argv = [python_for_child(policy), "-I", "-B", str(script)]
        return _run(argv, str(scratch), None, False, limits, frames, policy, report=True)


def python_for_child(policy: Policy | None = None) -> str:
    """The interpreter a run starts: mulligan's own, where the run's user can execute it (in
    a box with namespaces, its home holds mulligan's, so the home's mode does not matter)."""
    boxed = containment().level == "namespaces" and effective(policy).toolchain
    if not dropping_privileges() or boxed or _world_executable(sys.executable):
        return sys.executable
    for candidate in ("/usr/local/bin/python3", "/usr/bin/python3"):
        if os.path.exists(candidate) and _world_executable(candidate):
            return candidate
    raise UserError(
        f"sandbox: running as root, code runs as an unprivileged user, who cannot execute "
        f"{sys.executable}; install a system python3 (apt-get install python3) or run "
        "mulligan as a normal user"
    )


def _world_executable(path: str) -> bool:
    real = Path(os.path.realpath(path))
    return all(part.stat().st_mode & stat.S_IXOTH for part in [real, *real.parents])


@functools.cache
def _say_out_of_reach(blocked: tuple[str, ...]) -> None:
    if blocked:
        log.warning(
            "sandbox: without namespaces the run's user cannot pass %s, so the toolchain on "
            "your PATH there is out of its reach; install bubblewrap or allow unshare, or "
            "keep the venv outside",
            ", ".join(blocked),
        )


def _frame(value: Any) -> bytes:
    data = json.dumps(value).encode()
    return struct.pack(">Q", len(data)) + data


def _run(
    argv: list[str],
    scratch: str,
    cwd: str | Path | None,
    writable: bool,
    limits: Limits,
    stdin: bytes,
    policy: Policy | None,
    report: bool = False,
) -> RunResult:
    """Run argv with `scratch` (ours) and `cwd` (the caller's, or scratch) given to the child."""
    box = containment()
    boxed = box.level == "namespaces"
    drop = dropping_privileges()
    uid = random.choice(SANDBOX_UIDS)
    if drop:
        if not boxed:  # in a pid namespace, its init reaps; nothing reaches us
            processes.become_subreaper()
            _say_out_of_reach(tuple(out_of_reach(home())))
        give_to(scratch, uid)
        if cwd is not None and writable:
            give_to(cwd, uid)
    workdir = str(Path(cwd).resolve()) if cwd is not None else scratch
    nproc = (
        limits.processes if drop else len(processes.processes(uid=os.getuid())) + limits.processes
    )
    env = {key: os.environ[key] for key in KEPT_ENV if key in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(TMPDIR=scratch, HOME=workdir, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    tree = processes.MemoryCgroup(limits.memory_bytes)
    if boxed:
        owner = uid if drop else None
        watch = tree.path is None
        plan = make_plan(scratch, workdir, writable, limits, owner, effective(policy), watch)
        env["HOME"] = plan.home or workdir
        assert box.backend is not None  # namespaces come from a backend
        argv = ARGV[box.backend](argv, plan)
    report_read, report_write = os.pipe() if report else (-1, -1)
    if report:
        env["MULLIGAN_REPORT_FD"] = str(report_write)
    started = time.perf_counter()
    with tempfile.TemporaryFile() as stdin_file:  # unlinked: no path leads back to it
        stdin_file.write(stdin)
        stdin_file.seek(0)
        try:
            process = subprocess.Popen(
                argv,
                cwd=workdir,
                env=env,
                stdin=stdin_file,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(report_write,) if report else (),
                start_new_session=True,
                preexec_fn=limiter(limits, uid, nproc, boxed, tree.procs),
            )
        finally:
            if report:
                os.close(report_write)
    assert process.stdout is not None and process.stderr is not None
    out, err = Capped(limits.output_chars), Capped(limits.output_chars)
    sinks = {process.stdout.fileno(): out, process.stderr.fileno(): err}
    if report:
        sinks[report_read] = Capped(REPORT_BYTES)
    try:
        timed_out = pump(process, sinks, time.monotonic() + limits.timeout)
    finally:
        processes.kill_group(process.pid)
        if drop and not boxed:
            processes.kill_user(uid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        if drop and not boxed:
            processes.reap_group(process.pid)
        tree.close()
        process.stdout.close()
        process.stderr.close()
        if report:
            os.close(report_read)
    code = process.returncode
    if boxed and code is not None and 128 < code <= 128 + 64:
        code = 128 - code  # the box's init reports a killed child as 128 + signal
    return RunResult(
        exit_code=code,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        seconds=time.perf_counter() - started,
        stdout_dropped=out.dropped,
        stderr_dropped=err.dropped,
        report=sinks[report_read].text() if report else None,
    )
