"""One run's layout, the same whichever backend builds it (what is writable, bound, covered),
and the command each backend lays it out with: bubblewrap (`bwrap`) where it is installed,
else util-linux `unshare`.

`unshare` makes the namespaces (as a user: a user namespace too, root in it mapped to the
user); `box_init.py` runs as their pid 1, lays the mounts out as the plan says, and runs
the command in a child (as root: dropped to the run's user id; as a user: in a nested user
namespace, as the user, with no capabilities). Its exit takes every descendant with it.
"""

from __future__ import annotations

import functools
import marshal
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from mulligan.sandbox.policy import TEMP_DIRS, Policy, Reach, home, toolchain
from mulligan.sandbox.processes import NOBODY
from mulligan.sandbox.results import Limits

BOX_INIT = Path(__file__).with_name("box_init.py")
REMOUNT_VARIABLE = "MULLIGAN_SANDBOX_REMOUNT"
"""Set to 1, box_init takes the path kernels without `mount_setattr` (before 5.12) take."""

Step = tuple[Literal["tmpfs", "dir"], str]


@dataclass(frozen=True)
class Plan:
    scratch: str
    """Mulligan's own directory for the run (its script, TMPDIR): always writable."""
    workdir: str
    """Where the run starts: scratch, or the caller's directory."""
    writable: bool
    """Whether `workdir` is writable (only for directories mulligan made)."""
    network: bool
    uid: int | None
    """As root: the unprivileged user id the run drops to."""
    home: str | None
    """The box's own home, in place of the user's (HOME in the box)."""
    fresh: tuple[Step, ...]
    """In order: fresh empty tmpfs mounts (the temp directories, the home, any directory
    the run's user could not pass on the way to the toolchain) and the directories to make
    in them so that the binds below land."""
    toolchain: tuple[str, ...]
    """Bound read-only."""
    hide_dirs: tuple[str, ...]
    hide_files: tuple[str, ...]
    memory_bytes: int
    """The size of each fresh tmpfs, and the memory limit of the tree ..."""
    watch_tree: bool
    """... which the box watches itself where no cgroup holds the tree (unshare backend)."""


def make_plan(
    scratch: str,
    workdir: str,
    writable: bool,
    limits: Limits,
    uid: int | None,
    policy: Policy,
    watch_tree: bool = False,
) -> Plan:
    user_home = home()
    if policy.toolchain:
        reach = toolchain(user_home)
    else:
        reach = Reach(covers=(str(user_home),) if user_home else ())
    # mulligan's own interpreter under a temp directory (a venv in /tmp) would vanish under
    # the box's fresh /tmp: bound read-only, so every check can start (the toolchain has it
    # already unless the policy leaves the toolchain out)
    own = _under(sys.prefix, list(TEMP_DIRS)) and not _under(sys.prefix, list(reach.binds))
    toolchain_binds = (*reach.binds, *([sys.prefix] if own else []))
    binds = [*toolchain_binds, scratch, workdir]
    fresh: list[Step] = [("tmpfs", top) for top in TEMP_DIRS]
    for cover in (c for c in reach.covers if c not in TEMP_DIRS):
        fresh += [("dir", p) for p in _parents_in([top for _, top in fresh], [cover])]
        fresh.append(("tmpfs", cover))
    covering = [path for kind, path in fresh if kind == "tmpfs"]
    fresh += [("dir", p) for p in _parents_in(covering, binds)]
    needed = [scratch, workdir, os.path.realpath(sys.executable), sys.prefix]
    hide_dirs, hide_files = [], []
    for path in sorted(policy.hidden):
        if any(Path(n).is_relative_to(path) for n in needed):
            continue  # never cover what the box needs to run
        if _under(path, covering) and not _under(path, binds):
            continue  # under a fresh tmpfs: not there in the box anyway
        if os.path.isdir(path):
            hide_dirs.append(path)
        elif os.path.exists(path):
            hide_files.append(path)
    return Plan(
        scratch=scratch,
        workdir=workdir,
        writable=writable,
        network=limits.network,
        uid=uid,
        home=str(user_home) if user_home else None,
        fresh=tuple(fresh),
        toolchain=toolchain_binds,
        hide_dirs=tuple(hide_dirs),
        hide_files=tuple(hide_files),
        memory_bytes=limits.memory_bytes,
        watch_tree=watch_tree,
    )


def _parents_in(tops: list[str], paths: list[str]) -> list[str]:
    """The directories between the innermost top holding each path and it, outermost first."""
    parents: list[str] = []
    for path in paths:
        holding = [top for top in tops if Path(path).is_relative_to(top) and path != top]
        if not holding:
            continue
        top = max(holding, key=len)
        chain = [str(p) for p in Path(path).parents if p.is_relative_to(top) and str(p) != top]
        parents += [p for p in reversed(chain) if p not in parents]
    return parents


def _under(path: str, tops: list[str]) -> bool:
    return any(Path(path).is_relative_to(top) for top in tops)


def bwrap_argv(command: list[str], plan: Plan) -> list[str]:
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


def unshare_argv(command: list[str], plan: Plan) -> list[str]:
    """util-linux `unshare` around a command, `box_init.py` its pid 1 (see the module's
    docstring), given the plan whole."""
    box = ["unshare", "--mount", "--propagation", "private", "--pid", "--kill-child"]
    box += ["--mount-proc", "--ipc", "--uts"]
    if plan.uid is None:
        box += ["--user", "--map-root-user"]
    if not plan.network:
        box.append("--net")
    spec = {
        **asdict(plan),
        "outer": None if plan.uid is not None else [os.getuid(), os.getgid()],
        "remount": os.environ.get(REMOUNT_VARIABLE) == "1",
    }
    init = [sys.executable, "-I", "-S", str(BOX_INIT), marshal.dumps(spec).hex(), "--"]
    return [*box, "--", *init, *command]


ARGV: dict[str, Callable[[list[str], Plan], list[str]]] = {
    "bwrap": bwrap_argv,
    "unshare": unshare_argv,
}
"""Each backend's command around a command, for a plan."""
