"""Which containment is in force here: bubblewrap, util-linux `unshare`, or limits alone.

`MULLIGAN_SANDBOX` picks: `auto` (default: bubblewrap, else unshare, else limits only, said
once, loudly), `bwrap` or `unshare` (that backend or refuse), `namespaces` (either, or
refuse), `rlimits` (no namespaces).
"""

from __future__ import annotations

import functools
import logging
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Literal

from mulligan.errors import UserError
from mulligan.sandbox import processes
from mulligan.sandbox.marked import marked_directory
from mulligan.sandbox.plan import ARGV, make_plan
from mulligan.sandbox.policy import Policy
from mulligan.sandbox.processes import SANDBOX_UIDS, dropping_privileges, give_to, limiter
from mulligan.sandbox.results import Limits

log = logging.getLogger("mulligan")

Backend = Literal["bwrap", "unshare"]
NAMES: dict[Backend, str] = {"bwrap": "bubblewrap", "unshare": "util-linux unshare"}
"""The backends, in the order `auto` tries them."""
SETTINGS = ("auto", "bwrap", "unshare", "namespaces", "rlimits")


@dataclass(frozen=True)
class Containment:
    level: Literal["namespaces", "rlimits"]
    missing: list[str] = field(default_factory=list)
    """Protections that are off at this level."""
    detail: str = ""
    backend: Backend | None = None
    """What makes the namespaces (None at the `rlimits` level)."""


WITHOUT_NAMESPACES = [
    "network isolation",
    "private /tmp, /var/tmp and /dev/shm",
    "read-only host filesystem",
    "process isolation (other processes are visible)",
    "killing descendants that leave the process group",
    "hidden paths",
    "a home of its own (your home is as reachable as your uid allows)",
]
NO_TREE_MEMORY = "memory limit for the whole process tree (needs root and a memory cgroup)"


@functools.cache
def containment() -> Containment:
    """Which level of containment is in force here (probed once per process)."""
    wanted = os.environ.get("MULLIGAN_SANDBOX", "auto")
    if wanted not in SETTINGS:
        raise UserError(
            f"MULLIGAN_SANDBOX={wanted!r}: use auto (default: bubblewrap, else unshare, else "
            "limits only), bwrap, unshare, namespaces (either; refuse to run without) or "
            "rlimits (no namespaces)"
        )
    tree = [] if processes.memory_cgroup_root() else [NO_TREE_MEMORY]
    if wanted == "rlimits":
        return Containment("rlimits", WITHOUT_NAMESPACES + tree, "MULLIGAN_SANDBOX=rlimits")
    tried = [b for b in NAMES if wanted in ("auto", "namespaces", b)]
    problems: list[str] = []
    for backend in tried:
        problem = probe(backend)
        if problem is None:
            if problems:
                log.info("sandbox: %s; namespaces through %s instead", problems[-1], backend)
            watched = [] if backend == "unshare" else tree  # its init watches the tree's memory
            said = f"{NAMES[backend]} ({shutil.which(backend)})"
            return Containment("namespaces", watched, said, backend)
        problems.append(problem)
    why = "; ".join(problems)
    if wanted != "auto":
        raise UserError(f"sandbox: MULLIGAN_SANDBOX={wanted} but {why}")
    log.warning(
        "sandbox: NO NAMESPACES (%s); model-written code runs with resource limits only. OFF: %s",
        why,
        "; ".join(WITHOUT_NAMESPACES),
    )
    return Containment("rlimits", WITHOUT_NAMESPACES + tree, why)


def probe(backend: Backend) -> str | None:
    """None when a box of this backend starts here, else why not (with the fix)."""
    if not sys.platform.startswith("linux"):
        return f"Linux namespaces do not exist on {sys.platform}"
    if backend == "bwrap" and shutil.which("bwrap") is None:
        return "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    if backend == "unshare" and shutil.which("unshare") is None:
        return "unshare is not installed (it is in util-linux)"
    if backend == "bwrap" and dropping_privileges() and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    with marked_directory("mulligan-probe-") as made:
        scratch = str(made)
        uid = random.choice(SANDBOX_UIDS)
        give_to(scratch, uid)
        drop = uid if dropping_privileges() else None
        plan = make_plan(scratch, scratch, True, Limits(), drop, Policy(toolchain=False), True)
        try:
            done = subprocess.run(
                ARGV[backend](["/bin/true"], plan),
                capture_output=True,
                timeout=10,
                preexec_fn=limiter(Limits(), uid, 64, boxed=True),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{backend} failed to start: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return (
            f"{backend} cannot create namespaces here ({said[-1] if said else done.returncode}); "
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
            "kernel.apparmor_restrict_unprivileged_userns=0) or run as root"
        )
    return None
