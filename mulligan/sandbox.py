"""Run code and shell commands in a limited subprocess.

Limits: wall-clock timeout (the whole process group is killed), CPU seconds,
address space, file size, number of processes, a scratch working directory and
an environment that keeps only a short allow-list (no API keys or tokens).
When mulligan runs as root the child drops to an unprivileged user id of its
own (one per run), so it can neither write outside the directories it is given
nor escape the process limit, and mulligan adopts and reaps whatever the child
leaves behind.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from mulligan.errors import UserError

NOBODY = 65534
SANDBOX_UIDS = range(200_000, 260_000)
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


@dataclass(frozen=True)
class Limits:
    timeout: float = 10.0
    cpu_seconds: int = 10
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 32
    output_chars: int = 20_000


@dataclass
class RunResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def describe(self) -> str:
        """stdout and stderr together, with the exit status when it is not 0."""
        parts = []
        if self.stdout.strip():
            parts.append(self.stdout.rstrip())
        if self.stderr.strip():
            parts.append("[stderr]\n" + self.stderr.rstrip())
        if self.timed_out:
            parts.append(f"[timed out after {self.seconds:.1f}s; process killed]")
        elif self.exit_code not in (0, None):
            parts.append(f"[exit status {self.exit_code}{_signal_name(self.exit_code)}]")
        return "\n".join(parts) if parts else "(no output)"


def _signal_name(code: int | None) -> str:
    if code is None or code >= 0:
        return ""
    try:
        return f": killed by {signal.Signals(-code).name}"
    except ValueError:
        return ""


def run_python(
    code: str,
    *,
    cwd: str | Path | None = None,
    writable: bool = False,
    limits: Limits = Limits(),
    stdin: str = "",
) -> RunResult:
    """Run Python source in the sandbox; `cwd` defaults to a fresh scratch directory.

    `writable=True` hands `cwd` over to the child (as root: changes its owner), so pass it
    only for scratch directories that mulligan made, never for a user's own directory.
    """
    with tempfile.TemporaryDirectory(prefix="mulligan-sandbox-") as scratch:
        script = Path(scratch) / "main.py"
        script.write_text(code)
        argv = [_python_for_child(), "-I", "-B", str(script)]
        return _run(argv, scratch, cwd, writable, limits, stdin)


def run_shell(
    command: str,
    *,
    cwd: str | Path | None = None,
    writable: bool = False,
    limits: Limits = Limits(),
) -> RunResult:
    """Run a shell command in the sandbox, like `run_python`."""
    with tempfile.TemporaryDirectory(prefix="mulligan-sandbox-") as scratch:
        return _run(["/bin/sh", "-c", command], scratch, cwd, writable, limits, "")


def _dropping_privileges() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def give_to_sandbox(directory: str | Path, uid: int = NOBODY) -> None:
    """Make a scratch directory writable by the sandboxed child (only needed as root)."""
    if not _dropping_privileges():
        return
    for root, dirs, files in os.walk(directory):
        os.chown(root, uid, NOBODY)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, NOBODY)


def _world_executable(path: str) -> bool:
    real = Path(os.path.realpath(path))
    return all(part.stat().st_mode & stat.S_IXOTH for part in [real, *real.parents])


def _python_for_child() -> str:
    if not _dropping_privileges() or _world_executable(sys.executable):
        return sys.executable
    for candidate in ("/usr/local/bin/python3", "/usr/bin/python3"):
        if os.path.exists(candidate) and _world_executable(candidate):
            return candidate
    raise UserError(
        f"sandbox: running as root, code runs as 'nobody', who cannot execute {sys.executable}; "
        "install a system python3 (apt-get install python3) or run mulligan as a normal user"
    )


def _user_process_count() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                continue
    return count


def _run(
    argv: list[str],
    scratch: str,
    cwd: str | Path | None,
    writable: bool,
    limits: Limits,
    stdin: str,
) -> RunResult:
    """Run argv with `scratch` (ours) and `cwd` (the caller's, or scratch) given to the child."""
    drop = _dropping_privileges()
    uid = random.choice(SANDBOX_UIDS)
    if drop:
        _become_subreaper()
        give_to_sandbox(scratch, uid)
        if cwd is not None and writable:
            give_to_sandbox(cwd, uid)
    workdir = str(cwd or scratch)
    nproc = limits.processes if drop else _user_process_count() + limits.processes

    def limit_child() -> None:  # runs in the child between fork and exec
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if drop:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(uid)
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    env = {key: os.environ[key] for key in KEPT_ENV if key in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(HOME=workdir, TMPDIR=scratch, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    started = time.perf_counter()
    process = subprocess.Popen(
        argv,
        cwd=workdir,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=limit_child,
    )
    timed_out = False
    try:
        out, err = process.communicate(stdin.encode(), timeout=limits.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(process.pid)
        out, err = process.communicate()
    finally:
        _kill_group(process.pid)  # leftover background children
        if drop:
            _reap_group(process.pid)
    return RunResult(
        exit_code=process.returncode,
        stdout=_clip(out.decode(errors="replace"), limits.output_chars),
        stderr=_clip(err.decode(errors="replace"), limits.output_chars),
        timed_out=timed_out,
        seconds=time.perf_counter() - started,
    )


def _kill_group(pgid: int) -> None:
    for _ in range(3):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.005)


_subreaper = False


def _become_subreaper() -> None:
    """Adopt the orphans of sandboxed children so their zombies can be reaped here."""
    global _subreaper
    if _subreaper or not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    _subreaper = True


def _reap_group(pgid: int) -> None:
    """Wait for every process left in the sandbox's process group (they were killed)."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        members = _group_members(pgid)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.01)


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


class ScratchWorkspace:
    """A fresh temporary directory with the given files laid out, removed on exit.

    With `enabled=False` it yields None: the task needs no workspace.
    """

    def __init__(self, files: dict[str, str] | None, enabled: bool = True) -> None:
        self.files = files or {}
        self.enabled = enabled
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> Path | None:
        if not self.enabled:
            return None
        self._dir = tempfile.TemporaryDirectory(prefix="mulligan-ws-")
        root = Path(self._dir.name).resolve()
        for relative, content in self.files.items():
            target = (root / relative).resolve()
            if not target.is_relative_to(root):
                self._dir.cleanup()
                raise UserError(f"workspace file {relative!r} would lie outside the workspace")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        return root

    def __exit__(self, *exc: object) -> None:
        if self._dir is not None:
            self._dir.cleanup()
