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
