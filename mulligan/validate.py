"""Checks of what a user gives, run before any work starts: each failure is one UserError line.

Flags, embedding specs, strategies, output and memory locations, and text files. A command
checks everything it can here first, so a bad input never leaves half a run behind.
"""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mulligan.defaults import MAX_CHECK_SECONDS
from mulligan.errors import UserError
from mulligan.jsontext import UNREADABLE_JSON

MAX_CONCURRENCY = 256


@dataclass(frozen=True)
class Bound:
    minimum: float
    maximum: float = math.inf
    what: str = "a whole number"
    above_minimum: bool = False
    """The minimum itself is not allowed (a positive number of seconds)."""

    def problem(self, value: float) -> str | None:
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite {self.what.removeprefix('a ')}"
        low = value <= self.minimum if self.above_minimum else value < self.minimum
        if low or value > self.maximum:
            least = "above" if self.above_minimum else "at least"
            upper = "" if math.isinf(self.maximum) else f" and at most {self.maximum:g}"
            return f"must be {self.what} {least} {self.minimum:g}{upper}"
        return None


POSITIVE_INT = Bound(1)
NON_NEGATIVE_INT = Bound(0)
POSITIVE = Bound(0, what="a number", above_minimum=True)
NON_NEGATIVE = Bound(0, what="a number")

FLAG_BOUNDS: dict[str, Bound] = {
    "max_steps": POSITIVE_INT,
    "max_tokens": POSITIVE_INT,
    "max_format_errors": POSITIVE_INT,
    "max_repeats": POSITIVE_INT,
    "max_reply_tokens": POSITIVE_INT,
    "max_seconds": POSITIVE,
    "max_cost": NON_NEGATIVE,
    "timeout": POSITIVE,
    "temperature": Bound(0, 2, "a number"),
    "trials": POSITIVE_INT,
    "passes": POSITIVE_INT,
    "concurrency": Bound(1, MAX_CONCURRENCY),
    "validate_after": POSITIVE_INT,
    "refute_after": POSITIVE_INT,
    "retrieved_cases": NON_NEGATIVE_INT,
    "verify_pairs": POSITIVE_INT,
    "lesson_ttl_days": Bound(0, 36500, "a number of days", above_minimum=True),
    "compress_at": POSITIVE_INT,
    "keep_recent": NON_NEGATIVE_INT,
    "summary_cap": POSITIVE_INT,
    "context_window": POSITIVE_INT,
    "carried_reflections": NON_NEGATIVE_INT,
    "limit": POSITIVE_INT,
    "sample": POSITIVE_INT,
    "k": POSITIVE_INT,
    "check_timeout": Bound(0, MAX_CHECK_SECONDS, "a number of seconds", above_minimum=True),
    "price_in": NON_NEGATIVE,
    "price_out": NON_NEGATIVE,
}
"""Every numeric flag of every command (by argparse dest) and the values it accepts."""


def flag_name(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_flags(args: argparse.Namespace) -> None:
    """Numbers in range, known strategies and embeddings, usable output paths."""
    for dest, bound in FLAG_BOUNDS.items():
        value = getattr(args, dest, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            problem = bound.problem(value)
            if problem:
                raise UserError(f"{flag_name(dest)} {value}: {problem}")
    if getattr(args, "strategy", None) is not None:
        strategies([args.strategy], "--strategy")
    if getattr(args, "strategies", None) is not None:
        strategies(args.strategies.split(","), "--strategies")
    if getattr(args, "embedding", None):
        problem = embedding_problem(args.embedding)
        if problem:
            raise UserError(f"--embedding {args.embedding}: {problem}")
    if getattr(args, "command", None) in ("bench", "report", "demo"):
        output_directory(Path(args.out), "--out")
    if getattr(args, "command", None) == "attempt":
        attempt_tools(args.tools or "", Path(args.workspace))


def attempt_tools(names: str, workspace: Path) -> None:
    from mulligan.actor.builtin_tools import BUILTIN_TOOLS

    for name in (n.strip() for n in names.split(",") if n.strip()):
        if name not in BUILTIN_TOOLS or name in ("search", "lookup"):
            usable = ", ".join(t for t in BUILTIN_TOOLS if t not in ("search", "lookup"))
            raise UserError(f"--tools: {name!r} is not a tool `attempt` can use; use {usable}")
    if not workspace.is_dir():
        raise UserError(f"--workspace {workspace}: not a directory; pass an existing directory")


def strategies(names: Iterable[str], flag: str) -> list[str]:
    from mulligan import strategies as registry

    return [s.name for s in registry.parse(",".join(names), flag)]


def embedding_problem(spec: str) -> str | None:
    """What is wrong with an embedding spec (`minilm`, `minilm:DIR`, `hash[:N]`, `openai[:M]`)."""
    kind, _, argument = spec.partition(":")
    if kind == "hash":
        if argument and not (argument.isdigit() and 8 <= int(argument) <= 65536):
            return "the size after hash: must be a whole number from 8 to 65536 (e.g. hash:512)"
        return None
    if kind == "minilm":
        if argument and not Path(argument).expanduser().is_dir():
            return f"{argument} is not a directory; give the folder holding model.onnx"
        return None
    if kind == "openai":
        return None
    return "unknown embedding; use minilm, minilm:DIR, openai, openai:MODEL or hash"


def embedding_available(spec: str) -> None:
    """Before a run that will use the lesson store: its embedding model can be loaded."""
    import importlib.util

    kind, _, argument = spec.partition(":")
    if kind != "minilm":
        return
    from mulligan.memory.embeddings import find_minilm

    find_minilm(argument or None)
    for package in ("onnxruntime", "tokenizers"):
        if importlib.util.find_spec(package) is None:
            raise UserError(
                f"the minilm embedding needs the {package} package: pip install "
                "'mulligan[minilm]', or pick --embedding hash or --embedding openai"
            )


def output_directory(path: Path, flag: str) -> None:
    """A directory mulligan may create or write into (it is not a file, nor under one)."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path}: is a file, not a directory; pass another {flag} DIR")
    _creatable(path, flag)


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
    _creatable(path.parent, flag, target=path)


def _creatable(path: Path, flag: str, target: Path | None = None) -> None:
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


# ---------------------------------------------------------------- memory locations

SQLITE_MAGIC = b"SQLite format 3\x00"


def memory_directory(location: str) -> None:
    """A memory directory that can be used: not a file, creatable, its databases intact.

    Nothing is created or written here; damaged files are reported, never repaired.
    """
    if location.startswith(("http://", "https://")):
        chroma_url(location)
        return
    path = Path(location).expanduser()
    if path.exists() and not path.is_dir():
        raise UserError(
            f"--memory {location}: is a file, not a directory; pass a directory "
            "(it holds episodes.db and the lesson store)"
        )
    _creatable(path, "--memory")
    if (path / "lessons").exists() and not (path / "lessons").is_dir():
        raise UserError(
            f"{path / 'lessons'}: is a file, but the lesson store is a directory there; "
            "move the file away or pass another --memory"
        )
    sqlite_file(path / "episodes.db", "the episode log", "migrations")
    sqlite_file(path / "lessons" / "chroma" / "chroma.sqlite3", "the lesson store", "collections")


def memory_to_read(location: str) -> None:
    """A command that only reads a memory (or marks a lesson in it) needs one that is there:
    a mistyped --memory is refused, not made into a new, empty memory."""
    if location.startswith(("http://", "https://")):
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
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        finally:
            connection.close()
    except sqlite3.Error as exc:
        raise UserError(f"{path}: cannot be read as SQLite ({exc}); {fix}") from exc
    if tables and own_table not in tables:
        raise UserError(
            f"{path}: an SQLite database, but not {what} of mulligan (no {own_table} table); "
            "mulligan will not write into it: pass another --memory"
        )


COUNTERS = ("retrieved", "helped", "hurt", "reinforced")


def lesson_lines(path: Path) -> list[str]:
    """The lines of a lesson export (JSON lines), each checked to be a lesson record the
    store can hold: an id, not given twice, counters not below zero.

    Lines end at "\n" only: a lesson's text may hold U+2028 or U+0085, which JSON does not
    escape and `str.splitlines` would split at."""
    import json

    import pydantic

    from mulligan.schema import Lesson

    text = read_text(path, "lesson file (JSON lines)")
    lines = text.split("\n")
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except UNREADABLE_JSON as exc:  # not JSON, or JSON Python cannot read (huge, deep)
            problem = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)[:80]
            raise UserError(f"{where}: not a JSON line ({problem}); nothing was imported") from exc
        try:
            lesson = Lesson.model_validate(record)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(map(str, first["loc"])) or "(the record)"
            raise _not_a_lesson(where, f"{field}: {first['msg']}") from exc
        if not lesson.id.strip():
            raise _not_a_lesson(where, "id: empty; every lesson needs one")
        for counter in COUNTERS:
            if getattr(lesson.validity, counter) < 0:
                raise _not_a_lesson(where, f"validity.{counter}: must be at least 0")
        if lesson.id in seen:
            raise UserError(
                f"{where}: lesson {lesson.id!r} again (first on line {seen[lesson.id]}); "
                "nothing was imported: remove one of the two lines, or give one another id"
            )
        seen[lesson.id] = number
    return lines


def _not_a_lesson(where: str, problem: str) -> UserError:
    return UserError(
        f"{where}: not a lesson record: {problem}; nothing was imported "
        "(use a file from `mulligan memory export`)"
    )
