"""Tool calls a server left as text, recovered for the native protocol: Hermes `<tool_call>`
tags, or a reply that is nothing but bare JSON calls."""

from __future__ import annotations

import json
import re

from mulligan.actor.text_protocol import unfence
from mulligan.jsontext import UNREADABLE_JSON, first_json_object
from mulligan.schema import ToolCall

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


def recover_text_tool_calls(text: str, step_index: int) -> tuple[list[ToolCall], str]:
    """Tool calls a server left as text: Hermes `<tool_call>` tags, or a reply that is
    nothing but one or more bare JSON calls (fenced or not; a 1.5B model on llama.cpp wrote
    two in one ```python block).

    Returns the recovered calls and the text with them removed.
    """
    calls: list[ToolCall] = []
    for match in _HERMES.finditer(text):
        obj = first_json_object(match.group(1))
        if obj is not None and isinstance(obj.get("name"), str):
            calls.append(_call_from(obj, step_index, len(calls)))
    if calls:
        return calls, _HERMES.sub("", text).strip()
    objects = _json_objects_only(unfence(text))
    if objects and all(isinstance(o.get("name"), str) and "arguments" in o for o in objects):
        return [_call_from(obj, step_index, i) for i, obj in enumerate(objects)], ""
    return [], text


def _json_objects_only(text: str) -> list[dict[str, object]]:
    """The JSON objects the text consists of, one after another; [] if anything else is there."""
    decoder = json.JSONDecoder()
    found: list[dict[str, object]] = []
    position = 0
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        try:
            obj, position = decoder.raw_decode(text, position)
        except UNREADABLE_JSON:
            return []
        if not isinstance(obj, dict):
            return []
        found.append(obj)
    return found


def _call_from(obj: dict[str, object], step_index: int, position: int) -> ToolCall:
    arguments = obj.get("arguments", obj.get("parameters", {}))
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id=f"call_{step_index}_{position}", name=str(obj["name"]), arguments=text)
