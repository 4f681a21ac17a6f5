"""The box: run model-written code and commands as hostile code.

Every run gets, where Linux namespaces are available (through bubblewrap, `bwrap`):
  - a read-only view of the host, with its workspace (and a scratch directory) the only
    writable places, and its own empty /tmp, /var/tmp and /dev/shm;
  - no network (its own network namespace with only a loopback) unless `Limits.network`;
  - its own process namespace: it sees no other process, and when the run ends or its
    wall-clock limit passes, every descendant dies with it (daemons and `setsid` ones too);
  - paths registered with `hide` (datasets with answers, mulligan's own memory) covered.
Always: CPU, address-space, file-size and process-count limits; a scrubbed environment;
output streamed into capped buffers (what passes the cap is counted and dropped); as root,
an unprivileged user id of its own for every run.

Without namespaces the box falls back to those limits alone, says so once, and `mulligan
doctor` shows which protections are off. `MULLIGAN_SANDBOX=namespaces` refuses to run
without them; `MULLIGAN_SANDBOX=rlimits` turns them off.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import random
import selectors
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mulligan import processes
from mulligan.errors import UserError

log = logging.getLogger("mulligan")

NOBODY = 65534
SANDBOX_UIDS = range(200_000, 260_000)
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
EXIT_GRACE = 0.3
"""After the main process exits, how long a descendant may hold its output open."""
REPORT_BYTES = 1 << 20
HARNESS = Path(__file__).parent / "evaluator" / "harness.py"


@dataclass(frozen=True)
class Limits:
    timeout: float = 10.0
    cpu_seconds: int = 10
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 32
    output_chars: int = 20_000
    """Bytes kept of each of stdout and stderr (head and tail); the rest is counted and dropped."""
    network: bool = False


@dataclass
class RunResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    stdout_dropped: int = 0
    stderr_dropped: int = 0
    report: str | None = None
    """What the program wrote to its report descriptor (only for runs that asked for one)."""

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
            parts.append(f"[timed out after {self.seconds:.1f}s; every process killed]")
        elif self.exit_code not in (0, None):
            parts.append(f"[exit status {self.exit_code}{signal_name(self.exit_code)}]")
        return "\n".join(parts) if parts else "(no output)"


def signal_name(code: int | None) -> str:
    if code is None or code >= 0:
        return ""
    try:
        return f": killed by {signal.Signals(-code).name}"
    except ValueError:
        return ""


# ---------------------------------------------------------------- what is contained


@dataclass(frozen=True)
class Containment:
    level: Literal["namespaces", "rlimits"]
    missing: list[str] = field(default_factory=list)
    """Protections that are off at this level."""
    detail: str = ""


WITHOUT_NAMESPACES = [
    "network isolation",
    "private /tmp, /var/tmp and /dev/shm",
    "read-only host filesystem",
    "process isolation (other processes are visible)",
    "killing descendants that leave the process group",
    "hidden paths",
]
NO_TREE_MEMORY = "memory limit for the whole process tree (needs root and a memory cgroup)"


@functools.cache
def containment() -> Containment:
    """Which level of containment is in force here (probed once per process)."""
    wanted = os.environ.get("MULLIGAN_SANDBOX", "auto")
    if wanted not in ("auto", "namespaces", "rlimits"):
        raise UserError(
            f"MULLIGAN_SANDBOX={wanted!r}: use auto (default), namespaces (refuse to run "
            "without them) or rlimits (no namespaces)"
        )
    tree = [] if processes.memory_cgroup_root() else [NO_TREE_MEMORY]
    if wanted == "rlimits":
        return Containment("rlimits", WITHOUT_NAMESPACES + tree, "MULLIGAN_SANDBOX=rlimits")
    problem = _probe_namespaces()
    if problem is None:
        return Containment("namespaces", tree, f"bubblewrap ({shutil.which('bwrap')})")
    if wanted == "namespaces":
        raise UserError(f"sandbox: MULLIGAN_SANDBOX=namespaces but {problem}")
    log.warning(
        "sandbox: namespaces unavailable (%s); code runs with resource limits only: no %s",
        problem,
        ", no ".join(WITHOUT_NAMESPACES[:3]),
    )
    return Containment("rlimits", WITHOUT_NAMESPACES + tree, problem)


def _probe_namespaces() -> str | None:
    """None when a bubblewrap box starts here, else why not (with the fix)."""
    if not sys.platform.startswith("linux"):
        return f"Linux namespaces do not exist on {sys.platform}"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    if _dropping_privileges() and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    with tempfile.TemporaryDirectory(prefix="mulligan-probe-") as scratch:
        uid = random.choice(SANDBOX_UIDS)
        _give_to(scratch, uid)
        argv = _box_argv(["/bin/true"], scratch, scratch, True, Limits(), uid)
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                timeout=10,
                preexec_fn=_limiter(Limits(), uid, 64, boxed=True),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap failed to start: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return (
            f"bubblewrap cannot create namespaces here ({said[-1] if said else done.returncode}); "
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
        )
    return None


_hidden: set[str] = set()


def hide(path: str | Path) -> None:
    """Cover a file or directory in every later box (answers, mulligan's own memory)."""
    _hidden.add(str(Path(path).expanduser().resolve()))


# ---------------------------------------------------------------- entry points


def run_python(
    code: str,
    *,
    cwd: str | Path | None = None,
    writable: bool = False,
    limits: Limits = Limits(),
    stdin: str = "",
) -> RunResult:
    """Run Python source in the box; `cwd` defaults to a fresh scratch directory.

    `writable=True` lets the code write in `cwd` (as root: hands it over to the run's user),
    so pass it only for directories mulligan made, never for a user's own directory.
    """
    with tempfile.TemporaryDirectory(prefix="mulligan-sandbox-") as scratch:
        script = Path(scratch) / "main.py"
        script.write_text(code)
        argv = [_python_for_child(), "-I", "-B", str(script)]
        return _run(argv, scratch, cwd, writable, limits, stdin.encode())


def run_shell(
    command: str,
    *,
    cwd: str | Path | None = None,
    writable: bool = False,
    limits: Limits = Limits(),
) -> RunResult:
    """Run a shell command in the box, like `run_python`."""
    with tempfile.TemporaryDirectory(prefix="mulligan-sandbox-") as scratch:
        return _run(["/bin/sh", "-c", command], scratch, cwd, writable, limits, b"")


def run_tests(
    candidate: str,
    tests: str,
    entry_point: str | None,
    prelude: str,
    limits: Limits,
    reveal: bool = True,
) -> RunResult:
    """Run `tests` against `candidate` in the two-process harness; `report` holds its verdict.
    Without `reveal`, failures name tests by number, never by their source."""
    frames = _frame({"candidate": candidate, "prelude": prelude}) + _frame(
        {"tests": tests, "entry_point": entry_point, "prelude": prelude, "reveal": reveal}
    )
    with tempfile.TemporaryDirectory(prefix="mulligan-sandbox-") as scratch:
        script = Path(scratch) / "harness.py"
        script.write_text(HARNESS.read_text())
        argv = [_python_for_child(), "-I", "-B", str(script)]
        return _run(argv, scratch, None, False, limits, frames, report=True)


def _frame(value: Any) -> bytes:
    data = json.dumps(value).encode()
    return struct.pack(">Q", len(data)) + data


# ---------------------------------------------------------------- one run


def _dropping_privileges() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _give_to(directory: str | Path, uid: int) -> None:
    """Make a directory mulligan made writable by the run's user (only needed as root)."""
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
        f"sandbox: running as root, code runs as an unprivileged user, who cannot execute "
        f"{sys.executable}; install a system python3 (apt-get install python3) or run "
        "mulligan as a normal user"
    )


def _box_argv(
    argv: list[str], scratch: str, workdir: str, writable: bool, limits: Limits, uid: int
) -> list[str]:
    """bubblewrap around argv: read-only host, private /tmp, no network, own pid namespace.

    As root, bubblewrap itself sets the box up (it can reach every path) without a user
    namespace, and `setpriv` drops to the run's own user id, with no capabilities, inside.
    Otherwise bubblewrap makes an unprivileged user namespace as the user.
    """
    box = ["bwrap", "--die-with-parent", "--new-session"]
    as_root = _dropping_privileges()
    if as_root:
        box += ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
        box += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        if not limits.network:
            box.append("--unshare-net")
    else:
        box.append("--unshare-all")
        if limits.network:
            box.append("--share-net")
    box += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    box += ["--perms", "1777", "--tmpfs", "/tmp", "--perms", "1777", "--tmpfs", "/var/tmp"]
    for parent in _parents_in_tmp([scratch, workdir]):  # reachable, whatever the host's modes
        box += ["--perms", "0755", "--dir", parent]
    box += ["--bind", scratch, scratch]
    if workdir != scratch:
        box += ["--bind" if writable else "--ro-bind", workdir, workdir]
    needed = [scratch, workdir, os.path.realpath(sys.executable), sys.prefix]
    for path in sorted(_hidden):
        if any(Path(n).is_relative_to(path) for n in needed):
            continue  # never cover what the box needs to run
        if os.path.isdir(path):
            box += ["--tmpfs", path]
        elif os.path.exists(path):
            box += ["--ro-bind", "/dev/null", path]
    box += ["--chdir", workdir, "--"]
    if as_root:
        box += ["setpriv", f"--reuid={uid}", f"--regid={NOBODY}", "--clear-groups"]
        box += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return [*box, *argv]


def _parents_in_tmp(paths: list[str]) -> list[str]:
    """The directories between /tmp (or /var/tmp) and each path, outermost first."""
    parents: list[str] = []
    for path in paths:
        for top in ("/tmp", "/var/tmp"):
            if Path(path).is_relative_to(top):
                chain = [str(p) for p in Path(path).parents if p.is_relative_to(top)]
                parents += [p for p in reversed(chain) if p != top and p not in parents]
    return parents


def _limiter(limits: Limits, uid: int, nproc: int, boxed: bool, cgroup: str = "") -> Any:
    """Limits set between fork and exec; as root outside a box, the drop to `uid` too."""
    drop = _dropping_privileges() and not boxed

    def limit_child() -> None:  # runs in the child between fork and exec
        import resource

        processes.join_cgroup(cgroup)
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if drop:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(uid)
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    return limit_child


def _run(
    argv: list[str],
    scratch: str,
    cwd: str | Path | None,
    writable: bool,
    limits: Limits,
    stdin: bytes,
    report: bool = False,
) -> RunResult:
    """Run argv with `scratch` (ours) and `cwd` (the caller's, or scratch) given to the child."""
    level = containment().level
    drop = _dropping_privileges()
    uid = random.choice(SANDBOX_UIDS)
    if drop:
        if level == "rlimits":  # in a pid namespace, its init reaps; nothing reaches us
            processes.become_subreaper()
        _give_to(scratch, uid)
        if cwd is not None and writable:
            _give_to(cwd, uid)
    workdir = str(Path(cwd).resolve()) if cwd is not None else scratch
    nproc = (
        limits.processes if drop else len(processes.processes(uid=os.getuid())) + limits.processes
    )
    env = {key: os.environ[key] for key in KEPT_ENV if key in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(TMPDIR=scratch, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    env["HOME"] = workdir
    if level == "namespaces":
        argv = _box_argv(argv, scratch, workdir, writable, limits, uid)
    report_read, report_write = os.pipe() if report else (-1, -1)
    if report:
        env["MULLIGAN_REPORT_FD"] = str(report_write)
    started = time.perf_counter()
    tree = processes.MemoryCgroup(limits.memory_bytes)
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
                preexec_fn=_limiter(limits, uid, nproc, level == "namespaces", tree.procs),
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
        timed_out = _pump(process, sinks, time.monotonic() + limits.timeout)
    finally:
        processes.kill_group(process.pid)
        if drop and level == "rlimits":
            processes.kill_user(uid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        if drop and level == "rlimits":
            processes.reap_group(process.pid)
        tree.close()
        process.stdout.close()
        process.stderr.close()
        if report:
            os.close(report_read)
    code = process.returncode
    if level == "namespaces" and code is not None and 128 < code <= 128 + 64:
        code = 128 - code  # bubblewrap's init reports a killed child as 128 + signal
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


def _pump(process: subprocess.Popen[bytes], sinks: dict[int, Capped], deadline: float) -> bool:
    """Read every stream into its sink until all close; True when the deadline passed first.

    A descendant that keeps a stream open after the main process ended is given EXIT_GRACE.
    """
    selector = selectors.DefaultSelector()
    for fd in sinks:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    exited_at: float | None = None
    try:
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                return True
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > EXIT_GRACE:
                return False
            for key, _ in selector.select(min(deadline - now, 0.05)):
                fd = int(key.fd)
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if chunk:
                    sinks[fd].add(chunk)
                else:
                    selector.unregister(fd)
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
        return False
    except subprocess.TimeoutExpired:
        return True
    finally:
        selector.close()


class Capped:
    """A stream's head and tail, up to `limit` bytes; the middle is counted and dropped."""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        excess = len(self.tail) - self.half
        if excess > 0:
            self.dropped += excess
            del self.tail[:excess]

    def text(self) -> str:
        head = self.head.decode(errors="replace")
        tail = self.tail.decode(errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[... {self.dropped} bytes cut ...]\n{tail}"


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
