"""The seam between mulligan and a chat model: a small protocol and its response."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from mulligan.schema import ToolCall, Usage

Message = dict[str, Any]
"""An OpenAI-format chat message: role, content, and tool_calls / tool_call_id where used."""


SHORT_REPLY_TOKENS = 1024
"""The longest reply the reflector, the curator and an LLM judge may write, in tokens: each
answers with a short JSON object. Uncapped, a reply that degenerates (a small local model
repeating itself) runs until the server's context is full, holding a slot, and the episode
waiting on it, for many minutes."""


@dataclass
class ChatResponse:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    seed: int | None = None
    """The sampling seed the request was sent with (None: none was sent)."""
    fingerprint: str | None = None
    """The endpoint's `system_fingerprint`, where it sends one."""


Watch = Callable[[str], bool]
"""One reply's watch, told each piece of the reply in order: True once the text so far is
all the caller needs (the stream is then closed)."""

Until = Callable[[], Watch]
"""Makes a new watch for each reply read (a retried call reads its reply again). Told the
pieces rather than the text so far, a watch can keep the reading linear: joining the text
again at every piece took time quadratic in the pieces (minutes for a megabyte)."""


class ChatModel(Protocol):
    """Anything that answers a list of chat messages, optionally with tool calls."""

    name: str

    def chat(
        self,
        messages: list[Message],
        *,
        tools: list[dict[str, Any]] | None = None,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
        response_format: dict[str, Any] | None = None,
        until: Until | None = None,
        temperature: float | None = None,
    ) -> ChatResponse:
        """`timeout`: seconds for the whole call, after which it raises DeadlineExceeded.
        `response_format` asks for structured output (a JSON schema) where the endpoint
        accepts it; a model that cannot honour it answers in plain text instead. `until`
        makes a watch, told the reply piece by piece, that says when the reply so far is all
        the caller needs: a model that streams may stop there (the text protocol's turn ends
        with its first action); others ignore it.
        `temperature`: this call's, over the model's own (None: the model's own)."""
        ...


class EmbeddingModel(Protocol):
    def embed(self, texts: list[str]) -> list[list[float]]: ...


class Metered:
    """A ChatModel that adds up the usage of the calls made through it."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.name = model.name
        self.calls = 0
        self.usage = Usage()

    def chat(self, messages: list[Message], **options: Any) -> ChatResponse:
        """The model's reply, the options passed on as given (`ChatModel.chat`'s)."""
        response = self.model.chat(messages, **options)
        self.calls += 1
        self.usage = self.usage + response.usage
        return response
