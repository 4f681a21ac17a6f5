"""Paths a user names: output directories and files mulligan may create (never replacing a
user's file), and text files read as UTF-8 with each problem one line."""

from __future__ import annotations

import os
from pathlib import Path

from mulligan.errors import UserError


def output_directory(path: Path, flag: str) -> None:
    """A directory mulligan may create or write into (it is not a file, nor under one)."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path}: is a file, not a directory; pass another {flag} DIR")
    if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: no permission to write in it; pass another {flag} DIR")
    creatable(path, flag)


def output_file(path: Path, flag: str, replace: str) -> None:
    """A new file mulligan may create: an existing one is the user's and is never replaced
    unless they ask as `replace` says."""
    if path.is_dir():
        raise UserError(f"{flag} {path}: is a directory; pass a file name")
    if path.exists() or path.is_symlink():
        raise UserError(
            f"{flag} {path}: already exists and is kept; pass another {flag}, move it away, "
            f"or {replace}"
        )
    creatable(path.parent, flag, target=path)


def write_whole(path: Path, text: str, part: str = ".mulligan-writing-") -> None:
    """`text` into `path` whole or not at all: written beside it under the hidden name `part`
    + its name, then renamed over it (a process killed meanwhile leaves the part-file, and
    `path` as it was)."""
    writing = path.with_name(part + path.name)
    writing.write_text(text, encoding="utf-8")
    os.replace(writing, path)


def creatable(path: Path, flag: str, target: Path | None = None) -> None:
    shown = target or path
    for ancestor in [path, *path.parents]:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise UserError(
                    f"{flag} {shown}: cannot be created, {ancestor} is a file; pass another path"
                )
            if ancestor != path and not os.access(ancestor, os.W_OK | os.X_OK):
                raise UserError(
                    f"{flag} {shown}: cannot be created, no permission to write in {ancestor}; "
                    "pass another path"
                )
            return


def read_text(path: Path, what: str = "file") -> str:
    """A UTF-8 text file (without the byte order mark some editors write first), or a
    one-line error naming it and what is wrong."""
    try:
        return path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path}: not a UTF-8 text {what} (bad byte at offset {exc.start}); "
            "save it as UTF-8 text"
        ) from exc
    except IsADirectoryError as exc:
        raise UserError(f"{path}: is a directory, not a {what}") from exc
    except FileNotFoundError as exc:
        raise UserError(f"{path}: no such {what}") from exc
    except OSError as exc:
        raise UserError(f"{path}: cannot read this {what}: {exc.strerror}") from exc
