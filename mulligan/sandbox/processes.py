"""Processes the box leaves behind: the /proc table, killing, reaping, and a memory cgroup.

Linux only where it matters; elsewhere each helper does nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_libc: Any = None
if sys.platform.startswith("linux"):
    import ctypes

    _libc = ctypes.CDLL(None, use_errno=True)


def proc_table() -> Iterator[tuple[int, int, int]]:
    """(pid, uid, process group) of every process this one can see in /proc."""
    if not os.path.isdir("/proc"):
        return
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{entry}").st_uid
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        yield int(entry), uid, int(fields[2])


def processes(*, uid: int | None = None, pgid: int | None = None) -> list[int]:
    return [
        pid
        for pid, owner, group in proc_table()
        if (uid is None or owner == uid) and (pgid is None or group == pgid)
    ]


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


_subreaper = False


def become_subreaper() -> None:
    """Adopt the orphans of boxed children so that their zombies can be reaped here."""
    global _subreaper
    if _subreaper or not sys.platform.startswith("linux"):
        return
    assert _libc is not None
    pr_set_child_subreaper = 36
    _libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    _subreaper = True


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


# ---------------------------------------------------------------- memory cgroup


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


def join_cgroup(procs: str) -> None:
    """Between fork and exec: move this process into the cgroup."""
    if procs:
        with open(procs, "w") as handle:
            handle.write("0")


def die_with_parent() -> None:
    """Between fork and exec: SIGKILL this process when the thread that started it ends."""
    if _libc is not None:  # loaded before the fork: no import between fork and exec
        pr_set_pdeathsig = 1
        _libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
