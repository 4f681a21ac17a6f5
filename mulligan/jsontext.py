"""Finding JSON in model text: shared by the text protocol, the judge and the reflector."""

from __future__ import annotations

import json
import re
from typing import Any


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first `{...}` in the text that parses as a JSON object, or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None
