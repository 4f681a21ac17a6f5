"""Finding JSON in model text: shared by the text protocol, the judge and the reflector."""

from __future__ import annotations

import json
import re
from typing import Any

UNREADABLE_JSON = (ValueError, RecursionError)
"""What reading JSON a model wrote can raise: not JSON (JSONDecodeError, a ValueError), a
number too long for an int (ValueError), nesting too deep (RecursionError)."""


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first `{...}` in the text that parses as a JSON object, or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except UNREADABLE_JSON:
            continue
        if isinstance(value, dict):
            return value
    return None
