"""Offline token estimates, calibrated against the prompt tokens an endpoint reports."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mulligan.llm.base import Message

CHARS_PER_TOKEN = 4.0
TOKENS_PER_MESSAGE = 4


def raw_estimate(messages: list[Message], tools: list[dict[str, Any]] | None = None) -> float:
    """About four characters a token plus a few tokens of framing per message."""
    return _estimate(messages, len(json.dumps(tools)) if tools else 0)


def _estimate(messages: list[Message], tools_chars: int) -> float:
    """`tools_chars`: the length of the tool list as JSON (what it adds to a prompt)."""
    chars = tools_chars
    for message in messages:
        chars += len(message.get("content") or "")
        for call in message.get("tool_calls") or []:
            chars += len(call["function"]["name"]) + len(call["function"]["arguments"]) + 12
    return chars / CHARS_PER_TOKEN + TOKENS_PER_MESSAGE * len(messages)


@dataclass
class TokenEstimator:
    """`raw_estimate` times a ratio learned from the endpoint's reported prompt tokens."""

    ratio: float = 1.0
    smoothing: float = 0.5
    _measured: tuple[list[dict[str, Any]], int] | None = field(default=None, repr=False)
    """The last tool list measured and its length: an attempt offers the same list every
    call, so it is turned into JSON once, not once a call."""

    def estimate(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> int:
        return round(self._raw(messages, tools) * self.ratio)

    def calibrate(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, reported: int
    ) -> None:
        raw = self._raw(messages, tools)
        if reported > 0 and raw > 0:
            observed = min(max(reported / raw, 0.25), 4.0)
            self.ratio = self.smoothing * self.ratio + (1 - self.smoothing) * observed

    def _raw(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> float:
        if not tools:
            return _estimate(messages, 0)
        if self._measured is None or self._measured[0] is not tools:
            self._measured = tools, len(json.dumps(tools))
        return _estimate(messages, self._measured[1])
