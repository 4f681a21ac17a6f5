"""The box through util-linux `unshare`, where bubblewrap is missing.

`unshare` makes the namespaces (as a user: a user namespace too, root in it mapped to the
user); `box_init.py` runs as their pid 1, lays the mounts out as the plan says, and runs
the command in a child (as root: dropped to the run's user id; as a user: in a nested user
namespace, as the user, with no capabilities). Its exit takes every descendant with it.
"""

from __future__ import annotations

import marshal
import os
import sys
from pathlib import Path

from mulligan.sandbox.plan import Plan

BOX_INIT = Path(__file__).with_name("box_init.py")
REMOUNT_VARIABLE = "MULLIGAN_SANDBOX_REMOUNT"
"""Set to 1, box_init takes the path kernels without `mount_setattr` (before 5.12) take."""


def argv(command: list[str], plan: Plan) -> list[str]:
    box = ["unshare", "--mount", "--propagation", "private", "--pid", "--kill-child"]
    box += ["--mount-proc", "--ipc", "--uts"]
    if plan.uid is None:
        box += ["--user", "--map-root-user"]
    if not plan.network:
        box.append("--net")
    spec = {
        "scratch": plan.scratch,
        "workdir": plan.workdir,
        "writable": plan.writable,
        "loopback": not plan.network,
        "uid": plan.uid,
        "outer": None if plan.uid is not None else [os.getuid(), os.getgid()],
        "fresh": list(plan.fresh),
        "tmpfs_bytes": plan.memory_bytes,
        "tree_bytes": plan.memory_bytes if plan.watch_tree else None,
        "remount": os.environ.get(REMOUNT_VARIABLE) == "1",
        "toolchain": list(plan.toolchain),
        "hide_dirs": list(plan.hide_dirs),
        "hide_files": list(plan.hide_files),
    }
    init = [sys.executable, "-I", "-S", str(BOX_INIT), marshal.dumps(spec).hex(), "--"]
    return [*box, "--", *init, *command]
