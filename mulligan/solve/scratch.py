"""Where `solve`'s copies of the project live: a directory each in TMPDIR (`COPY...`), made
after a marker beside it (`COPY...OWNER`) that names the process making it, and removed,
then its marker, when the copy is done with. A solve killed with kill -9 removes nothing:
the next one removes what such a solve left (`remove_abandoned`), and only that: a copy
whose marker this user wrote and whose process has ended, never one whose process runs,
nor anything without a marker of its own, nor what a link there points to."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mulligan.sandbox.processes import SANDBOX_UIDS, dropping_privileges, gone, this_process

COPY = "mulligan-copy-"
OWNER = ".owner"


@contextlib.contextmanager
def copy_directory() -> Iterator[Path]:
    """A new empty directory for a copy, its marker written first; both removed on exit."""
    handle, name = tempfile.mkstemp(prefix=COPY, suffix=OWNER)
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


def remove_abandoned(keep: Path) -> list[Path]:
    """Remove the copies that solves no longer running left in TMPDIR (see the module), and
    return them; `keep`: the user's project, never removed even were it one of them."""
    removed, project = [], keep.resolve()
    for marker in sorted(Path(tempfile.gettempdir()).resolve().glob(f"{COPY}*{OWNER}")):
        root = marker.with_name(marker.name.removesuffix(OWNER))
        if _abandoned(marker) and _made_here(root) and not project.is_relative_to(root):
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
    the copy it works in), or nothing: a marker whose copy is gone."""
    try:
        info = root.lstat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    boxed = dropping_privileges() and info.st_uid in SANDBOX_UIDS
    return stat.S_ISDIR(info.st_mode) and (info.st_uid == os.getuid() or boxed)


def _remove(root: Path, marker: Path) -> None:
    """The copy, whatever an attempt did to its directories' modes, then its marker: one
    that cannot all be removed keeps its marker, for a later solve to try again."""
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
    """A directory of the copy made readable and writable by its owner (never a link's
    target)."""
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(os.lstat(path).st_mode):
            os.chmod(path, 0o700)
