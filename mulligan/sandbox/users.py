"""Who a run is: as root, an unprivileged user id of its own; and the limits set at its start."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

from mulligan.errors import UserError
from mulligan.sandbox import processes
from mulligan.sandbox.results import Limits

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


def world_executable(path: str) -> bool:
    real = Path(os.path.realpath(path))
    return all(part.stat().st_mode & stat.S_IXOTH for part in [real, *real.parents])


def python_for_child(home_bound: bool) -> str:
    """The interpreter a run starts: mulligan's own, where the run's user can execute it.

    `home_bound`: the box binds mulligan's interpreter into its home (namespaces), so the
    home's mode does not matter."""
    if not dropping_privileges() or home_bound or world_executable(sys.executable):
        return sys.executable
    for candidate in ("/usr/local/bin/python3", "/usr/bin/python3"):
        if os.path.exists(candidate) and world_executable(candidate):
            return candidate
    raise UserError(
        f"sandbox: running as root, code runs as an unprivileged user, who cannot execute "
        f"{sys.executable}; install a system python3 (apt-get install python3) or run "
        "mulligan as a normal user"
    )


def limiter(limits: Limits, uid: int, nproc: int, boxed: bool, cgroup: str = "") -> Any:
    """Limits set between fork and exec; as root outside a box, the drop to `uid` too.

    In a box the parent's death kills it (the box's init then kills the rest)."""
    drop = dropping_privileges() and not boxed

    def limit_child() -> None:  # runs in the child between fork and exec
        import resource

        processes.join_cgroup(cgroup)
        if boxed:
            processes.die_with_parent()
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
