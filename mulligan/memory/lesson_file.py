"""A lesson export (JSON lines) to import: every line a lesson record the store can hold,
or one error naming file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic

from mulligan.errors import UserError, field_problems
from mulligan.inputs.paths import read_text
from mulligan.jsontext import UNREADABLE_JSON
from mulligan.schema import Lesson

COUNTERS = ("retrieved", "helped", "hurt", "reinforced")


def lesson_lines(path: Path) -> list[str]:
    """The lines of a lesson export (JSON lines), each checked to be a lesson record the
    store can hold: an id, not given twice, counters not below zero.

    Lines end at "\n" only: a lesson's text may hold U+2028 or U+0085, which JSON does not
    escape and `str.splitlines` would split at."""
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
            raise _not_a_lesson(where, field_problems(exc, "(the record)")[0]) from exc
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
