"""The directories mulligan makes in TMPDIR, and what a killed mulligan left there.

Each (a task's workspace `mulligan-ws-`, the box's scratch `mulligan-sandbox-`, a copy of
solve's project `mulligan-copy-`, a containment probe's `mulligan-probe-`) is made after a
marker beside it (its name and `.owner`) that names the process making it, and removed, then
its marker, when it is done with. A process killed with kill -9 removes nothing: the next
run, bench, solve or memory verify removes what such a process left (`remove_abandoned`),
and only that: a directory whose marker this user wrote and whose process has ended, never
one whose process runs, nor anything without a marker of its own, nor what a link there
points to, nor a directory of the user's that is, or holds, one named to keep."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from mulligan.sandbox.processes import SANDBOX_UIDS, dropping_privileges, gone, this_process

MARKED = "mulligan-"
"""What the name of every marked directory starts with (then its kind's prefix's rest)."""
OWNER = ".owner"


@contextlib.contextmanager
def marked_directory(prefix: str) -> Iterator[Path]:
    """A new empty directory in TMPDIR named `prefix...` (which starts with MARKED), its
    marker written first; both removed on exit."""
    if not prefix.startswith(MARKED):
        raise ValueError(f"a marked directory's prefix starts with {MARKED!r}: {prefix!r}")
    handle, name = tempfile.mkstemp(prefix=prefix, suffix=OWNER)
    marker, root = Path(name), Path(name.removesuffix(OWNER))
    try:
        with os.fdopen(handle, "w") as written:
            json.dump(this_process(), written)
        root.mkdir(mode=0o700)  # (one of that name already there is not ours: kept)
    except BaseException:
        marker.unlink()
        raise
    try:
        yield root.resolve()
    finally:
        _remove(root, marker)


def remove_abandoned(keep: Iterable[Path] = ()) -> list[Path]:
    """Remove the directories that processes no longer running left in TMPDIR (see the
    module), and return them; `keep`: the user's directories (a project, a memory; and the
    working directory), never removed, nor any directory holding one, even were it marked."""
    here = [Path.cwd()] if os.path.isdir(".") else []  # (a working directory since removed)
    kept = [path.resolve() for path in (*keep, *here)]
    removed = []
    for marker in sorted(Path(tempfile.gettempdir()).resolve().glob(f"{MARKED}*{OWNER}")):
        root = marker.with_name(marker.name.removesuffix(OWNER))
        if any(path.is_relative_to(root) for path in kept):
            continue
        if _abandoned(marker) and _made_here(root):
            _remove(root, marker)
            removed += [] if os.path.lexists(marker) else [root]
    return removed


def _abandoned(marker: Path) -> bool:
    """The marker is a file of this user's naming a process that has ended."""
    try:
        info = marker.lstat()
        mine = stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
        owner = json.loads(marker.read_text()) if mine else None
    except (OSError, ValueError):
        return False
    return isinstance(owner, dict) and gone(owner)


def _made_here(root: Path) -> bool:
    """A directory (not a link) of this user's, or of a box's user as root (the box is given
    the directories it works in), or nothing: a marker whose directory is gone."""
    try:
        info = root.lstat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    boxed = dropping_privileges() and info.st_uid in SANDBOX_UIDS
    return stat.S_ISDIR(info.st_mode) and (info.st_uid == os.getuid() or boxed)


def _remove(root: Path, marker: Path) -> None:
    """The directory, whatever the code run there did to its directories' modes, then its
    marker: one that cannot all be removed keeps its marker, for a later run to try again."""
    shutil.rmtree(root, ignore_errors=True)
    if os.path.lexists(root):  # a directory an attempt made unreadable or unwritable
        _open_up(str(root))
        for parent, directories, _ in os.walk(root):  # each opened up before it is entered
            for name in directories:
                _open_up(os.path.join(parent, name))
        shutil.rmtree(root, ignore_errors=True)
    if not os.path.lexists(root):
        marker.unlink(missing_ok=True)


def _open_up(path: str) -> None:
    """A directory made readable and writable by its owner (never a link's target)."""
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(os.lstat(path).st_mode):
            os.chmod(path, 0o700)
