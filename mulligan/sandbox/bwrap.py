"""The box through bubblewrap (`bwrap`), where it is installed."""

from __future__ import annotations

import functools
import subprocess

from mulligan.sandbox.plan import Plan
from mulligan.sandbox.users import NOBODY


def argv(command: list[str], plan: Plan) -> list[str]:
    """bubblewrap around a command: read-only host, private /tmp, no network, own pid namespace.

    As root, bubblewrap itself sets the box up (it can reach every path) without a user
    namespace, and `setpriv` drops to the run's own user id, with no capabilities, inside.
    Otherwise bubblewrap makes an unprivileged user namespace as the user.
    """
    box = ["bwrap", "--die-with-parent", "--new-session"]
    if plan.uid is not None:
        box += ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
        box += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        if not plan.network:
            box.append("--unshare-net")
    else:
        box.append("--unshare-all")
        if plan.network:
            box.append("--share-net")
    box += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    size = ["--size", str(plan.memory_bytes)] if _sizes_tmpfs() else []
    size = ["--size", str(plan.memory_bytes)] if _sizes_tmpfs() else []
    for kind, path in plan.fresh:  # directories made are reachable, whatever the host's modes
        if kind == "tmpfs":
            box += [*size, "--perms", "1777", "--tmpfs", path]
        else:
            box += ["--perms", "0755", "--dir", path]
    for path in plan.toolchain:
        box += ["--ro-bind", path, path]
    box += ["--bind", plan.scratch, plan.scratch]
    if plan.workdir != plan.scratch:
        box += ["--bind" if plan.writable else "--ro-bind", plan.workdir, plan.workdir]
    for path in plan.hide_dirs:
        box += ["--tmpfs", path]
    for path in plan.hide_files:
        box += ["--ro-bind", "/dev/null", path]
    box += ["--chdir", plan.workdir, "--"]
    if plan.uid is not None:
        box += ["setpriv", f"--reuid={plan.uid}", f"--regid={NOBODY}", "--clear-groups"]
        box += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return [*box, *command]


@functools.cache
def _sizes_tmpfs() -> bool:
    """Whether this bubblewrap has `--size` (0.5 and later): each tmpfs then holds at most
    the run's memory limit, also where no cgroup counts it."""
    try:
        said = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in said.stdout + said.stderr
