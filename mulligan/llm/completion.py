"""A chat completion's body as the endpoint sent it, read strictly: what is malformed is
named (and becomes feedback to the model or a retry), never guessed at. A JSON `\ud800`
escape is valid but no character: its text keeps U+FFFD there (`encodable`), else it could
be neither sent back nor logged."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mulligan.schema import ToolCall
from mulligan.untrusted import encodable


class MalformedReply(Exception):
    """A 200 response whose body is not a chat completion; retried like a transient fault."""

    def __init__(self, problem: str, body: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.body = body


@dataclass
class Completion:
    text: str
    tool_calls: list[ToolCall]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    fingerprint: str | None = None
    """The endpoint's `system_fingerprint` (its backend's build and settings), if sent."""


def read_completion(body: str | bytes) -> Completion:
    """The parts of a chat completion mulligan uses; `MalformedReply` for any other shape.
    `body` as sent (bytes) or decoded: JSON is read from either, and text is made of bytes
    only for the error that quotes them."""

    def bad(problem: str) -> MalformedReply:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        return MalformedReply(problem, text)

    try:
        data = json.loads(body)
    except ValueError as exc:
        raise bad(f"the body is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise bad("the body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise bad("no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise bad("choices[0].message is missing or not an object")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise bad(f"message content is a {type(content).__name__}, not text")
    finish_reason = choices[0].get("finish_reason")
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise bad("finish_reason is not text")
    usage = data.get("usage") or {}
    if not isinstance(usage, dict):
        raise bad("usage is not an object")
    tokens = [usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0]
    if not all(isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 0 for n in tokens):
        raise bad("usage token counts are not numbers")
    return Completion(
        text=encodable(content or ""),
        tool_calls=_tool_calls(message.get("tool_calls"), bad),
        finish_reason=finish_reason or "stop",
        prompt_tokens=int(tokens[0]),
        completion_tokens=int(tokens[1]),
        fingerprint=fingerprint_of(data),
    )


def fingerprint_of(data: dict[str, Any]) -> str | None:
    """A body's (or chunk's) `system_fingerprint`, when it is text."""
    found = data.get("system_fingerprint")
    return found if isinstance(found, str) and found else None


def json_field(body: str, name: str, kind: type) -> Any:
    """`body`'s field `name`, which must be of `kind`; `MalformedReply` otherwise."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise MalformedReply(f"the body is not JSON ({exc})", body) from None
    if not isinstance(data, dict) or not isinstance(data.get(name), kind):
        raise MalformedReply(f"no `{name}` {kind.__name__} in the body", body)
    return data[name]


def _tool_calls(calls: Any, bad: Callable[[str], MalformedReply]) -> list[ToolCall]:
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise bad("tool_calls is not a list")
    found = []
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad(f"tool_calls[{index}] has no function name")
        call_id = call.get("id")
        found.append(
            ToolCall(
                id=call_id if isinstance(call_id, str) and call_id else f"call_{index}",
                name=encodable(function["name"]),
                arguments=encodable(_arguments_text(function.get("arguments"))),
            )
        )
    return found


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
