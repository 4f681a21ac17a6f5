"""Finding JSON in model text: shared by the text protocol, the judge and the reflector."""

from __future__ import annotations

import json
import re
from typing import Any

UNREADABLE_JSON = (ValueError, RecursionError)
"""What reading JSON a model wrote can raise: not JSON (JSONDecodeError, a ValueError), a
number too long for an int (ValueError), nesting too deep (RecursionError)."""

_OBJECT_START = re.compile(r'\{\s*(?:\}|"[^"\\]*(?:\\.[^"\\]*)*"\s*:)', re.S)
"""Where an object can start: a brace, then the closing brace or a whole key and its colon.
A brace before anything else is never read: a megabyte of `{"` (or `[{"`) was read at each of
its braces, each read failing a few characters in."""
WINDOW = 8192
"""Characters an object is first read from (see `first_json_object`)."""


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first `{...}` in the text that parses as a JSON object, or None.

    Each try reads a window from its brace, and the whole text only when the window cut the
    object short: an error's position is counted in lines from the start of what was read,
    so a long reply of braces, read whole at each, took minutes. A try nested deeper than
    Python reads skips the braces in the rest of its window, an object among them too: each
    would be read down to the same limit (a megabyte of unclosed `{"a":` took seconds, a try at
    each of its 200,000 braces), and no model nests a thousand deep."""
    decoder = json.JSONDecoder()
    match = _OBJECT_START.search(text)
    while match is not None:
        start = match.start()
        match = _OBJECT_START.search(text, start + 1)
        window = text[start : start + WINDOW]
        try:
            return dict(decoder.raw_decode(window)[0])
        except json.JSONDecodeError as exc:  # read on only where the window's end was reached
            ran_out = exc.pos >= len(window) - 10 or exc.msg.startswith("Unterminated")
            if not ran_out or len(window) == len(text) - start:
                continue
        except RecursionError:
            match = _OBJECT_START.search(text, start + WINDOW)
            continue
        except UNREADABLE_JSON:
            continue
        try:
            return dict(decoder.raw_decode(text, start)[0])
        except RecursionError:
            match = _OBJECT_START.search(text, start + WINDOW)
        except UNREADABLE_JSON:
            continue
    return None


_MARK = re.compile(r'[{}"\\]')
"""What a brace count must look at: braces, and the quotes and escapes strings hide them in."""


class ObjectEnds:
    """Where a JSON object written piece by piece can end, each character looked at once:
    told each piece from the object's start (blanks before it too), True at a piece with a
    closing brace, outside any string, that closes the first. Only there can the object read
    whole; where the value starts with no brace, never."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = self.escaped = self.started = self.never = False

    def __call__(self, piece: str) -> bool:
        if not self.started:
            if not (piece := piece.lstrip()):
                return False
            self.started, self.never = True, not piece.startswith("{")
        if self.never:
            return False
        closed, escaped_at = False, 0 if self.escaped else -1
        for mark in _MARK.finditer(piece):
            at, char = mark.start(), mark.group()
            if at == escaped_at:
                continue
            if self.in_string:
                if char == "\\":
                    escaped_at = at + 1
                self.in_string = char != '"'
            elif char == '"':
                self.in_string = True
            elif char in "{}":
                self.depth += 1 if char == "{" else -1
                closed = closed or self.depth == 0
        self.escaped = escaped_at == len(piece)
        return closed
