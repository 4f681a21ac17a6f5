"""Offline token estimates, calibrated against the prompt tokens an endpoint reports."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mulligan.llm.base import Message

CHARS_PER_TOKEN = 4.0
TOKENS_PER_MESSAGE = 4


def raw_estimate(messages: list[Message], tools: list[dict[str, Any]] | None = None) -> float:
    """About four characters a token plus a few tokens of framing per message."""
    chars = 0
    for message in messages:
        chars += len(message.get("content") or "")
        for call in message.get("tool_calls") or []:
            chars += len(call["function"]["name"]) + len(call["function"]["arguments"]) + 12
    if tools:
        chars += len(json.dumps(tools))
    return chars / CHARS_PER_TOKEN + TOKENS_PER_MESSAGE * len(messages)


@dataclass
class TokenEstimator:
    """`raw_estimate` times a ratio learned from the endpoint's reported prompt tokens."""

    ratio: float = 1.0
    smoothing: float = 0.5

    def estimate(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> int:
        return round(raw_estimate(messages, tools) * self.ratio)

    def calibrate(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, reported: int
    ) -> None:
        raw = raw_estimate(messages, tools)
        if reported > 0 and raw > 0:
            observed = min(max(reported / raw, 0.25), 4.0)
            self.ratio = self.smoothing * self.ratio + (1 - self.smoothing) * observed
