"""One run's layout, the same whichever backend builds it: what is writable, bound, covered."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mulligan.sandbox.policy import TEMP_DIRS, Policy, Reach, home, toolchain
from mulligan.sandbox.results import Limits

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
