"""The rows of a benchmark's data file, each with the line it starts on, and the checks every
loader makes of them: the fields it reads are text, each id is used once. A problem is one
`UserError` naming the file, the line and the field."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mulligan.errors import UserError
from mulligan.inputs.paths import read_text

Rows = list[tuple[int, Any]]
"""(the line a row starts on, the row)"""
_SPACE = re.compile(r"[ \t\n\r]*")


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """One JSON object a line (gzipped when the name ends .gz); a file of none is refused."""
    if path.suffix == ".gz":
        try:
            text = gzip.decompress(path.read_bytes()).decode("utf-8")
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise UserError(f"{path}: not a gzip file of UTF-8 JSON lines ({exc})") from exc
    else:
        text = read_text(path, "JSON-lines data file")
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):  # U+2028 may be in a string
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise UserError(f"{path}:{number}: not valid JSON: {_why(exc)}") from exc
        if not isinstance(row, dict):
            raise UserError(f"{path}:{number}: expected a JSON object per line")
        rows.append((number, row))
    if not rows:
        raise UserError(f"{path}: no tasks in it; give one JSON object a line")
    return rows


def read_json_list(path: Path, what: str) -> Rows:
    """The items of a file that is one JSON list of `what`s; a list of none is refused."""
    text = read_text(path, f"{what} file")
    at = _skip(text, 0)
    if not text.startswith("[", at):
        raise UserError(f"{path}: expected a JSON list of {what}s")
    items: Rows = []
    decoder, line, counted = json.JSONDecoder(), 1, 0
    at = _skip(text, at + 1)
    try:
        while not text.startswith("]", at):
            if items and not text.startswith(",", at):
                raise json.JSONDecodeError("Expecting ',' delimiter", text, at)
            at = _skip(text, at + 1) if items else at
            line, counted = line + text.count("\n", counted, at), at
            item, at = decoder.raw_decode(text, at)
            items.append((line, item))
            at = _skip(text, at)
        if text[at + 1 :].strip():
            raise json.JSONDecodeError("Extra data", text, at + 1)
    except (ValueError, RecursionError) as exc:
        line = exc.lineno if isinstance(exc, json.JSONDecodeError) else line
        raise UserError(f"{path}:{line}: not valid JSON: {_why(exc)}") from exc
    if not items:
        raise UserError(f"{path}: no {what}s in it")
    return items


def _why(exc: ValueError | RecursionError) -> str:
    """What the JSON reader found wrong, in one line."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]


def _skip(text: str, at: int) -> int:
    """Past the JSON whitespace at `at` (the pattern matches the empty string too)."""
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]


def text_fields(
    row: dict[str, Any], where: str, required: Iterable[str], optional: Iterable[str], form: str
) -> None:
    """Each required field is there, and each of them and of the optional ones there is text."""
    required = tuple(required)
    missing = [name for name in required if name not in row]
    if missing:
        raise UserError(
            f"{where}: missing field(s) {', '.join(map(repr, missing))} ({form} format)"
        )
    for name in (*required, *optional):
        if name in row and not isinstance(row[name], str):
            got = type(row[name]).__name__
            raise UserError(f"{where}: field {name!r} must be text, not {got} ({form} format)")


def refuse_repeats(path: Path, field: str, ids: Iterable[tuple[int, str]]) -> None:
    """Two tasks with one id would share one episode and one verdict."""
    first: dict[str, int] = {}
    for line, name in ids:
        if name in first:
            raise UserError(
                f"{path}:{line}: field {field!r}: id {name!r} is on line {first[name]} too; "
                "give each task its own id"
            )
        first[name] = line
