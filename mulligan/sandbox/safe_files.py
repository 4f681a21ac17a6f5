"""Files in a workspace that the box has written into, reached without leaving it.

The box's code may plant symlinks, FIFOs or links to files it could not read itself, and
may swap a directory for a symlink while mulligan (perhaps as root) is on its way to a file.
So paths are walked one component at a time from an open descriptor of the workspace, no
symlink is followed anywhere, only regular files are read or written, and nothing blocks.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_FILE_BYTES = 16 << 20


class Unreadable(Exception):
    """A workspace path mulligan will not read or write, and why."""


def read_workspace_file(workspace: Path, relative: str) -> str:
    """A regular file's text; as root, only a file the box's user could have read."""
    fd = _open(workspace, relative, os.O_RDONLY, create_dirs=False)
    with os.fdopen(fd, "rb") as handle:
        if not _box_may_read(os.fstat(handle.fileno()), workspace):
            raise Unreadable(f"{relative} is not readable by the candidate")
        return handle.read(MAX_FILE_BYTES).decode(errors="replace")


def write_workspace_file(workspace: Path, relative: str, content: str) -> None:
    """Create or overwrite a regular file (and its directories) inside the workspace."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    with os.fdopen(_open(workspace, relative, flags, create_dirs=True), "w") as handle:
        handle.write(content)


def _open(workspace: Path, relative: str, flags: int, *, create_dirs: bool) -> int:
    path = Path(relative)
    if not path.parts or path.is_absolute() or ".." in path.parts:
        raise Unreadable(f"{relative} leads outside the workspace")
    directory = os.open(workspace.resolve(), os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in path.parts[:-1]:
            if create_dirs and not os.path.lexists(f"/proc/self/fd/{directory}/{part}"):
                os.mkdir(part, dir_fd=directory)
            inner = _open_at(directory, part, os.O_RDONLY | os.O_DIRECTORY, relative)
            os.close(directory)
            directory = inner
        fd = _open_at(directory, path.parts[-1], flags | os.O_NONBLOCK, relative)
    finally:
        os.close(directory)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Unreadable(f"{relative} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def _open_at(directory: int, name: str, flags: int, relative: str) -> int:
    try:
        return os.open(name, flags | os.O_NOFOLLOW, 0o644, dir_fd=directory)
    except FileNotFoundError:
        raise Unreadable(f"{relative} does not exist") from None
    except OSError as exc:
        if os.path.islink(f"/proc/self/fd/{directory}/{name}"):
            raise Unreadable(f"{relative} is a symlink; links are not followed") from None
        raise Unreadable(f"{relative}: {exc.strerror}") from None


def _box_may_read(info: os.stat_result, root: Path) -> bool:
    """Whether the box's user could read the file: it owns it, or anyone may read it."""
    if os.geteuid() != 0:
        return True  # not root: mulligan reads as the very user the box ran as
    owner = root.stat().st_uid
    return info.st_uid == owner != 0 or bool(info.st_mode & stat.S_IROTH)
