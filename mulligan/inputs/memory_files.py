"""A memory location a user names: a directory that can be used (its SQLite files intact and
mulligan's own), one that holds a memory for a command that only reads, or a chroma URL.
Nothing is created or written here; damaged files are reported, never repaired."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from mulligan.errors import UserError
from mulligan.inputs.paths import creatable

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_server(location: str) -> bool:
    """Whether a memory location names a chroma server (its URL) rather than a directory:
    decided here alone."""
    return location.startswith(("http://", "https://"))


def log_directory(location: str, default: str) -> str:
    """The directory that holds a memory's episode log: the one the location names, or for a
    chroma server (which holds the lessons alone), `default`."""
    return default if is_server(location) else location


def memory_directory(location: str) -> None:
    """A memory directory that can be used: not a file, creatable, its databases intact."""
    if is_server(location):
        chroma_url(location)
        return
    path = Path(location).expanduser()
    if path.exists() and not path.is_dir():
        raise UserError(
            f"--memory {location}: is a file, not a directory; pass a directory "
            "(it holds episodes.db and the lesson store)"
        )
    creatable(path, "--memory")
    lessons = path / "lessons"
    for place, kind in ((lessons, "directory"), (lessons / "chroma", "directory"),
                        (lessons / "lessons.lock", "file")):  # fmt: skip
        found = "directory" if place.is_dir() else "file"
        if place.exists() and found != kind:
            raise UserError(f"{place}: is a {found}, but the lesson store keeps a {kind} there; "
                            f"move the {found} away or pass another --memory")  # fmt: skip
    sqlite_file(path / "episodes.db", "the episode log", "migrations")
    sqlite_file(path / "lessons" / "chroma" / "chroma.sqlite3", "the lesson store", "collections")


def memory_to_read(location: str) -> None:
    """A command that only reads a memory (or marks a lesson in it) needs one that is there:
    a mistyped --memory is refused, not made into a new, empty memory."""
    if is_server(location):
        return
    path = Path(location).expanduser()
    if not path.exists():
        raise UserError(
            f"--memory {location}: no such directory; pass the memory a run or "
            "`mulligan memory import` made"
        )
    if not (path / "episodes.db").exists() and not (path / "lessons").exists():
        raise UserError(
            f"--memory {location}: holds no memory (no episodes.db, no lessons/); pass the "
            "memory a run or `mulligan memory import` made"
        )


def chroma_url(location: str) -> None:
    from urllib.parse import urlparse

    try:
        url = urlparse(location)
        url.port  # noqa: B018 (parsing the port is the check)
    except ValueError as exc:
        raise UserError(f"--memory {location}: not a chroma server URL ({exc})") from exc
    if not url.hostname:
        raise UserError(f"--memory {location}: no host; use e.g. http://127.0.0.1:8000")


def sqlite_file(path: Path, what: str, own_table: str) -> None:
    """Refuse a database that is not SQLite, is cut short, cannot be read, or is someone
    else's (it has tables but not `own_table`, so mulligan would write into a stranger's file).
    """
    if not path.exists():
        return
    fix = f"{what}: restore it from a backup, or move it away (or pass another --memory)"
    if not path.is_file():
        raise UserError(f"{path}: is not a file; {fix}")
    size = path.stat().st_size
    if size == 0:
        return  # SQLite treats an empty file as an empty database
    with open(path, "rb") as handle:
        header = handle.read(100)
    if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
        raise UserError(f"{path}: not an SQLite database (damaged or overwritten); {fix}")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    header_is_current = header[24:28] == header[92:96]
    in_use = Path(f"{path}-wal").exists()  # a writer may be checkpointing: sizes can lag
    if header_is_current and pages and size < pages * page_size and not in_use:
        raise UserError(f"{path}: truncated ({size} of {pages * page_size} bytes); {fix}")
    try:
        with contextlib.closing(read_only(path, in_use)) as connection:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    except sqlite3.Error as exc:
        raise UserError(f"{path}: cannot be read as SQLite ({exc}); {fix}") from exc
    if tables and own_table not in tables:
        raise UserError(
            f"{path}: an SQLite database, but not {what} of mulligan (no {own_table} table); "
            "mulligan will not write into it: pass another --memory"
        )


def read_only(path: Path, shared: bool) -> sqlite3.Connection:
    """An SQLite file opened to read without writing to it or making a side file: `immutable`
    while no writer has it open (every commit is in the file), else `shared` (`mode=ro`) with
    the writer's side files, seeing its commits."""
    mode = "mode=ro" if shared else "immutable=1"
    return sqlite3.connect(f"{path.resolve().as_uri()}?{mode}", uri=True, check_same_thread=False)
