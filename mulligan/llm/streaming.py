"""A streamed chat completion read until the caller has what it needs.

The text protocol's turn is over once its first action's input is written; whatever a small
model writes after it (observations it imagines, more actions) is never run. Read streamed,
the reply can stop there: closing the stream makes a self-hosted server (llama.cpp) stop
generating. Its tokens are still counted as the server counts them: the usage a server sends
at the end (`stream_options.include_usage`), or, when the stream is closed before the end,
llama.cpp's per-token `timings` (`timings_per_token`) of the last chunk read: prompt tokens
(`cache_n + prompt_n`) and tokens generated so far (`predicted_n`). A server that reports
neither leaves the call unmetered (`Usage.unmetered_calls`), never guessed at.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mulligan.llm.base import Until, Watch
from mulligan.llm.completion import Completion, MalformedReply, fingerprint_of
from mulligan.untrusted import encodable


def read_whole() -> Watch:
    """A watch that never stops the reply: it is read to its end."""
    return lambda piece: False


STREAM_FIELDS: dict[str, Any] = {
    "stream": True,
    "stream_options": {"include_usage": True},
    "timings_per_token": True,  # llama.cpp: the counts so far in every chunk
}
"""What a request adds to be streamed with its usage."""


@dataclass
class StreamRead:
    """A reply as read (streamed or whole)."""

    completion: Completion
    metered: bool
    """The server reported the tokens (usage at the end, or the counts so far)."""


def read_stream(chunks: Iterable[Any], until: Until) -> StreamRead:
    """Read chat-completion chunks until the stream ends or a watch `until` made holds."""
    parts: list[str] = []
    watch, held = until(), False
    finish, counts, read, fingerprint = "stop", None, 0, None
    for chunk in chunks:
        read += 1
        if not isinstance(chunk, dict):
            raise MalformedReply("a streamed chunk is not a JSON object", str(chunk)[:2000])
        counts = _counts(chunk) or counts
        fingerprint = fingerprint_of(chunk) or fingerprint
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                raise MalformedReply("a streamed choice is not an object", str(chunk)[:2000])
            delta = choice.get("delta") or {}
            text = delta.get("content") if isinstance(delta, dict) else None
            if text is not None and not isinstance(text, str):
                raise MalformedReply("streamed content is not text", str(chunk)[:2000])
            parts.append(text or "")
            held = watch(text or "")
            finish = choice.get("finish_reason") or finish
        if held and not _final(chunk):
            break
    if not read:
        raise MalformedReply("the stream sent no chunk", "")
    prompt, completion = counts or (0, 0)
    text = encodable("".join(parts))
    completed = Completion(text, [], finish, prompt, completion, fingerprint)
    return StreamRead(completed, metered=counts is not None)


def _final(chunk: dict[str, Any]) -> bool:
    """The chunk that ends the reply (a finish reason): its usage follows, worth the read."""
    return any(isinstance(c, dict) and c.get("finish_reason") for c in chunk.get("choices") or [])


def _counts(chunk: dict[str, Any]) -> tuple[int, int] | None:
    """(prompt, completion) tokens the chunk reports: its usage, else llama.cpp's timings."""
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int) and _whole(prompt, completion):
            return prompt, completion
    timings = chunk.get("timings")
    if isinstance(timings, dict):
        cached, fresh, made = (timings.get(k) for k in ("cache_n", "prompt_n", "predicted_n"))
        if isinstance(cached, int) and isinstance(fresh, int) and isinstance(made, int):
            return (cached + fresh, made) if _whole(cached, fresh, made) else None
    return None


def _whole(*numbers: object) -> bool:
    return all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers)
