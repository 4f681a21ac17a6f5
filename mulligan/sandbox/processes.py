"""The box's processes: who a run is (as root, an unprivileged user id of its own), the limits
set at its start, and what it leaves behind (the /proc table, killing, reaping, a memory
cgroup); and whether a process that left a record (a run, a copy) is still there.

Linux only where it matters; elsewhere each helper does nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mulligan.sandbox.results import Limits

_libc: Any = None
if sys.platform.startswith("linux"):
    import ctypes

    _libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
NOBODY = 65534
SANDBOX_UIDS = range(200_000, 260_000)


def dropping_privileges() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def give_to(directory: str | Path, uid: int) -> None:
    """Make a directory mulligan made writable by the run's user (only needed as root)."""
    if not dropping_privileges():
        return
    for root, dirs, files in os.walk(directory):
        os.chown(root, uid, NOBODY)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, NOBODY)


def limiter(limits: Limits, uid: int, nproc: int, boxed: bool, cgroup: str = "") -> Any:
    """Limits set between fork and exec; as root outside a box, the drop to `uid` too.

    `cgroup`: the memory cgroup's `procs` file the child joins. In a box the parent's death
    kills it (the box's init then kills the rest)."""
    drop = dropping_privileges() and not boxed

    def limit_child() -> None:  # runs in the child between fork and exec
        import resource

        if cgroup:
            with open(cgroup, "w") as handle:
                handle.write("0")
        if boxed and _libc is not None:  # SIGKILL when the thread that started it ends
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
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


# ---------------------------------------------------------------- what a run leaves


def processes(*, uid: int | None = None, pgid: int | None = None) -> list[int]:
    """The pids this process can see in /proc, of user `uid` and process group `pgid`."""
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            owner = os.stat(f"/proc/{entry}").st_uid
            with open(f"/proc/{entry}/stat") as handle:
                group = int(handle.read().rsplit(")", 1)[1].split()[2])
        except OSError:
            continue
        if (uid is None or owner == uid) and (pgid is None or group == pgid):
            found.append(int(entry))
    return found


def kill_group(pgid: int) -> None:
    for _ in range(3):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.005)


def kill_user(uid: int) -> None:
    """Every process of a user id of its own (root only; for boxes without a pid namespace)."""
    for _ in range(3):
        pids = processes(uid=uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def become_subreaper() -> None:
    """Adopt the orphans of boxed children so that their zombies can be reaped here."""
    if _libc is not None:
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_group(pgid: int) -> None:
    """Wait for every process left in a process group (they were killed)."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        members = processes(pgid=pgid)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.01)


def memory_cgroup_root() -> Path | None:
    """Where this process may make memory cgroups (root, cgroup v1 or v2), if anywhere."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return None
    v1 = Path("/sys/fs/cgroup/memory")
    if (v1 / "memory.limit_in_bytes").exists() and os.access(v1, os.W_OK):
        return v1
    v2 = Path("/sys/fs/cgroup")
    controllers = v2 / "cgroup.controllers"
    if controllers.exists() and "memory" in controllers.read_text().split():
        subtree = (v2 / "cgroup.subtree_control").read_text().split()
        if "memory" in subtree and os.access(v2, os.W_OK):
            return v2
    return None


class MemoryCgroup:
    """A cgroup that caps the memory of a whole process tree; `procs` is what the child
    writes "0" into (between fork and exec) to join it. Inactive where cgroups are not ours."""

    def __init__(self, limit_bytes: int) -> None:
        root = memory_cgroup_root()
        self.path: Path | None = None
        self.procs = ""
        if root is None:
            return
        path = root / f"mulligan-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            path.mkdir()
            limit_file = "memory.limit_in_bytes" if root.name == "memory" else "memory.max"
            (path / limit_file).write_text(str(limit_bytes))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return
        self.path, self.procs = path, str(path / "cgroup.procs")

    def close(self) -> None:
        if self.path is None:
            return
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.01)  # its last processes are still exiting


# ---------------------------------------------------------------- whether a process is there


def this_process() -> dict[str, Any]:
    """This process as a later one tells whether it still runs (`gone`): its host, its pid
    and when it started (clock ticks after boot; None where /proc does not say)."""
    found = _stat(os.getpid())
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": found[1] if found else None,
    }


def gone(owner: Mapping[str, Any]) -> bool:
    """The process `this_process` described has ended: on this host, no process has its pid,
    or the one that has is a zombie or started at another time (the pid was reused). One on
    another host, or described otherwise, is taken to be running."""
    pid = _pid_here(owner)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's: it is there
        pass
    found = _stat(pid)
    if found is None:  # no /proc to say more (or it ended just now: told next time)
        return False
    state, started = found
    return state == "Z" or owner.get("started") not in (None, started)


def working(owner: Mapping[str, Any]) -> bool:
    """The process `this_process` described is known to run still, and is not this one: on
    this host, its pid held by a live process that started when it did."""
    pid = _pid_here(owner)
    found = _stat(pid) if pid is not None and pid != os.getpid() else None
    return found is not None and found[0] != "Z" and owner.get("started") == found[1]


def _pid_here(owner: Mapping[str, Any]) -> int | None:
    """The pid of a process `this_process` described on this host (None: on another host,
    or no pid a process could have)."""
    pid = owner.get("pid")
    if os.name != "posix" or owner.get("host") != socket.gethostname():
        return None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def _stat(pid: int) -> tuple[str, int] | None:
    """A process's state letter and start time, from /proc (None where it does not say)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None
