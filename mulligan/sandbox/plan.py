"""One run's layout, the same whichever backend builds it: what is writable, bound, covered."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from mulligan.sandbox.policy import Policy, home, toolchain_paths

TEMP_DIRS = ("/tmp", "/var/tmp")


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
    """Covered by an empty home of the box's own ..."""
    toolchain: tuple[str, ...]
    """... into which these are bound read-only."""
    parents: tuple[str, ...]
    """Directories to make inside the fresh tmpfs mounts, outermost first, so that binds land."""
    hide_dirs: tuple[str, ...]
    hide_files: tuple[str, ...]

    @property
    def tmpfs(self) -> list[str]:
        """The fresh, empty, writable mounts: the temp directories and the home."""
        return [*TEMP_DIRS, *([self.home] if self.home else [])]


def make_plan(
    scratch: str, workdir: str, writable: bool, network: bool, uid: int | None, policy: Policy
) -> Plan:
    user_home = home()
    toolchain = toolchain_paths(user_home) if policy.toolchain else ()
    covering = [*TEMP_DIRS, *([str(user_home)] if user_home else [])]
    needed = [scratch, workdir, os.path.realpath(sys.executable), sys.prefix]
    binds = [*toolchain, scratch, workdir]
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
        network=network,
        uid=uid,
        home=str(user_home) if user_home else None,
        toolchain=toolchain,
        parents=tuple(_parents_in(covering, binds)),
        hide_dirs=tuple(hide_dirs),
        hide_files=tuple(hide_files),
    )


def _parents_in(tops: list[str], paths: list[str]) -> list[str]:
    """The directories between each top (a fresh tmpfs) and each path, outermost first."""
    parents: list[str] = []
    for path in paths:
        for top in tops:
            if Path(path).is_relative_to(top):
                chain = [str(p) for p in Path(path).parents if p.is_relative_to(top)]
                parents += [p for p in reversed(chain) if p != top and p not in parents]
    return parents


def _under(path: str, tops: list[str]) -> bool:
    return any(Path(path).is_relative_to(top) for top in tops)
