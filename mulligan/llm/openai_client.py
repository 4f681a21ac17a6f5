"""The OpenAI-compatible chat client: the only module that imports openai."""

from __future__ import annotations

import functools
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import openai

from mulligan.errors import DeadlineExceeded, EndpointUnreachable, ModelError
from mulligan.llm.base import ChatResponse, Message, Until
from mulligan.llm.completion import Completion, MalformedReply, json_field, read_completion
from mulligan.llm.hosts import self_hosted, stops_for
from mulligan.llm.pricing import UNSET, Price, Unset, cost_of, price_for
from mulligan.llm.refusals import (
    format_forms,
    refuses_reply_cap,
    refuses_seed,
    refuses_stream,
    rejects_format,
)
from mulligan.llm.streaming import STREAM_FIELDS, StreamRead, read_stream, read_whole
from mulligan.schema import Usage

log = logging.getLogger("mulligan")

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}

SDK_METADATA = ("Lang", "Package-Version", "OS", "Arch", "Runtime", "Runtime-Version", "Async")
"""The SDK's `X-Stainless-*` headers: this machine's OS, architecture and Python, and (per
request, below) the SDK's own retry count and timeout. Not sent: an endpoint has no use for
them, some gateways refuse them, and each is work for the SDK and the server every call."""
PER_REQUEST_METADATA = ("Retry-Count", "Read-Timeout")


class OpenAIChatModel:
    """Chat completions on any OpenAI-compatible endpoint, with bounded retries."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        price: Price | None | Unset = UNSET,
        stream_until: bool | None = None,
    ) -> None:
        self.name = model
        self.temperature = temperature
        self.max_retries = max_retries
        self.backoff = backoff
        self._sleep = sleep
        self.timeout = timeout
        self.price = price_for(model) if price is UNSET else price
        """US dollars per million tokens; None when unknown (costs are then unknown too)."""
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout,
            max_retries=0,
            default_headers=_omitted(SDK_METADATA),
        )
        self.base_url = str(self._client.base_url)
        self._chat_url = f"{self.base_url.rstrip('/')}/chat/completions"  # whole: not re-joined
        self.stream_until = self_hosted(self.base_url) if stream_until is None else stream_until
        """A call given `until` is streamed and read only until it holds (`streaming`): on by
        default where the model is served on this machine or network (`self_hosted`), whose
        server stops generating when the stream is closed; a hosted API bills the whole
        reply whatever is read, so there the reply is read whole."""
        self.rejected_formats = 0
        """How many forms of response_format this endpoint rejected (see `_asked`)."""
        self.reply_cap_field = "max_tokens"
        """OpenAI's reasoning models refuse `max_tokens` and take `max_completion_tokens`;
        servers that follow the older API take only `max_tokens`. Switched on refusal."""
        self.seeds: random.Random | None = random.Random()
        """Draws the sampling seed each request is sent with (its reply's record keeps it);
        None from the endpoint's first refusal of one on."""

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
        """One completion; `timeout` bounds the whole call, retries included. With `until`
        (and `stream_until`), streamed, and read only until the watch it makes holds;
        `temperature` over the model's own."""
        body: dict[str, Any] = {"model": self.name, "messages": messages}
        body["temperature"] = self.temperature if temperature is None else temperature
        if tools:
            body["tools"] = tools
        if stop:
            body["stop"] = stops_for(self.base_url, stop)
        if max_tokens:
            body[self.reply_cap_field] = max_tokens
        if self.seeds is not None:
            body["seed"] = self.seeds.randrange(2**31)
        deadline = None if timeout is None else time.monotonic() + timeout
        started, tally = time.perf_counter(), Tally()
        streamed = until is not None and self.stream_until and not tools and not response_format
        try:
            reply = self._asked(body, response_format, deadline, until, tally, streamed)
        except (ModelError, EndpointUnreachable) as exc:
            exc.unmetered_calls = tally.timed_out
            raise
        prompt, completion = reply.prompt_tokens, reply.completion_tokens
        usage = Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost=cost_of(self.price, prompt, completion),
            unmetered_calls=tally.timed_out,
        )
        return ChatResponse(
            text=reply.text,
            tool_calls=reply.tool_calls,
            finish_reason=reply.finish_reason,
            usage=usage,
            latency_s=time.perf_counter() - started,
            seed=body.get("seed"),  # none once the endpoint refused it
            fingerprint=reply.fingerprint,
        )

    def _asked(
        self,
        body: dict[str, Any],
        response_format: dict[str, Any] | None,
        deadline: float | None,
        until: Until | None,
        tally: Tally,
        streamed: bool,
    ) -> Completion:
        """The reply, asked again without each part of the request the endpoint refuses
        (`refusals`), and that part never sent again: a stream (HTTP 400/422 naming it), a
        sampling seed, `max_tokens` (then `max_completion_tokens`), a form of `response_format`.

        OpenAI, vLLM, Ollama and llama.cpp's server take a `json_schema`; llama-cpp-python's
        server takes `json_object` with a `schema` and answers the other with HTTP 422 or (0.3.36)
        HTTP 500 naming `response_format`. When every form was rejected the request goes in
        plain text.
        """
        while True:
            forms = format_forms(response_format)[self.rejected_formats :]
            request = {**body, "response_format": forms[0]} if forms else body
            try:
                read: StreamRead = self._with_retries(
                    functools.partial(self._ask, request, deadline, until, streamed),
                    deadline,
                    tally,
                )
                tally.timed_out += not read.metered
                return read.completion
            except ModelError as exc:
                if streamed and refuses_stream(exc):
                    log.warning(
                        "endpoint refused a streamed request (HTTP %s); not streaming", exc.status
                    )
                    self.stream_until = streamed = False
                elif "seed" in body and refuses_seed(exc):
                    log.warning(
                        "endpoint refused a sampling seed (HTTP %s); sending none", exc.status
                    )
                    self.seeds, _ = None, body.pop("seed")
                elif "max_tokens" in body and refuses_reply_cap(exc, self.reply_cap_field):
                    log.warning("endpoint refused max_tokens; sending max_completion_tokens")
                    self.reply_cap_field = "max_completion_tokens"
                    body["max_completion_tokens"] = body.pop("max_tokens")
                elif forms and rejects_format(exc):
                    self.rejected_formats += 1
                    log.warning(
                        "endpoint rejected response_format %s (HTTP %s)",
                        forms[0]["type"],
                        exc.status,
                    )
                else:
                    raise

    def _ask(
        self, body: dict[str, Any], deadline: float | None, until: Until | None, streamed: bool
    ) -> StreamRead:
        """POST /chat/completions through the SDK's client (auth, timeouts, errors); streamed,
        read until `until` holds, then closed: the server sees the connection go and stops
        generating.

        `chat.completions.create` walks every message through the SDK's TypedDict
        transform and builds its pydantic models for the reply, ~1 ms per call on a
        long history; our messages are plain JSON already and the reply is read here,
        from its bytes, so that a malformed body is a clear error and not a crash.
        """
        options = cast(Any, self._options(deadline))
        if not streamed:
            reply = self._client.post(self._chat_url, body=body, cast_to=bytes, options=options)
            return StreamRead(read_completion(reply), metered=True)
        stream = self._client.post(
            self._chat_url,
            body={**body, **STREAM_FIELDS},
            cast_to=object,
            options=options,
            stream=True,
            stream_cls=openai.Stream[object],
        )
        try:
            return read_stream(stream, until or read_whole)
        finally:
            stream.close()

    def _options(self, deadline: float | None) -> dict[str, Any]:
        """One request's: no metadata headers; a timeout ending by `deadline` (if any)."""
        options: dict[str, Any] = {"headers": _omitted(PER_REQUEST_METADATA)}
        if deadline is not None:
            options["timeout"] = min(self.timeout, deadline - time.monotonic())
            if options["timeout"] <= 0:
                raise DeadlineExceeded("the attempt's time budget ran out before the model call")
        return options

    def list_models(self) -> list[str]:
        def read(body: str) -> list[str]:
            data = json_field(body, "data", list)
            if not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data):
                raise MalformedReply("a model in `data` has no id", body)
            return [m["id"] for m in data]

        return cast(list[str], self._fetched("/models", read))

    def embed(self, texts: list[str]) -> list[list[float]]:
        def read(body: str) -> list[list[float]]:
            data = json_field(body, "data", list)
            vectors = [item.get("embedding") if isinstance(item, dict) else None for item in data]
            if len(vectors) != len(texts) or not all(
                isinstance(v, list) and all(type(x) in (int, float) for x in v) for v in vectors
            ):
                raise MalformedReply(f"`data` is not {len(texts)} embeddings of numbers", body)
            return [[float(x) for x in v or []] for v in vectors]

        body = {"model": self.name, "input": texts, "encoding_format": "float"}
        return cast(list[list[float]], self._fetched("/embeddings", read, body))

    def _fetched(self, path: str, read: Callable[[str], Any], body: Any = None) -> Any:
        """`read` of what GET `path` answers (POST, with a `body`), retried as a chat call."""
        options = cast(Any, self._options(None))
        if body is None:
            return self._with_retries(
                lambda: read(self._client.get(path, cast_to=str, options=options))
            )
        return self._with_retries(
            lambda: read(self._client.post(path, body=body, cast_to=str, options=options))
        )

    def _with_retries(
        self, call: Callable[[], Any], deadline: float | None = None, tally: Tally | None = None
    ) -> Any:
        """Transient faults (429, 5xx, timeouts, unreachable, malformed replies) are retried
        with backoff; with a `deadline`, no try and no wait goes past it."""
        for attempt in range(self.max_retries + 1):
            tries, last = f"after {attempt + 1} tries", attempt == self.max_retries
            wait = self.backoff * 2**attempt
            try:
                return call()
            except openai.APIStatusError as exc:
                status, body = exc.status_code, _body_text(exc)
                final = last or status not in RETRYABLE_STATUS
                if final or "response_format" in body:  # a refused form is no transient fault
                    said = f"endpoint answered HTTP {status} {tries}: {body[:300]}"
                    raise ModelError(said, status=status, body=body) from exc
                wait = _retry_after(exc) or wait * (1 + random.random() / 4)
                failure = f"HTTP {status}"
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                timed_out = isinstance(exc, openai.APITimeoutError)
                if timed_out and tally is not None:
                    tally.timed_out += 1  # sent, maybe served and billed, never reported
                if timed_out and deadline is not None and time.monotonic() >= deadline - 0.05:
                    raise DeadlineExceeded(
                        "the model call was cut off: the attempt's time budget ran out"
                    ) from exc
                failure = "timed out" if timed_out else "unreachable"
                if last:
                    error = ModelError if timed_out else EndpointUnreachable
                    raise error(f"endpoint {self.base_url} {failure} {tries}: {exc}") from exc
            except (MalformedReply, json.JSONDecodeError, openai.APIResponseValidationError) as exc:
                problem, body = _malformed(exc)
                if last:
                    raise ModelError(
                        f"endpoint {self.base_url} sent a malformed reply {tries}: {problem}; "
                        f"body: {body[:200]!r}",
                        status=200,
                        body=body[:2000],
                    ) from exc
                failure = f"malformed reply ({problem})"
            if deadline is not None and time.monotonic() + wait >= deadline:
                raise DeadlineExceeded(
                    f"the attempt's time budget ran out while retrying a model call ({failure})"
                )
            log.warning(
                "model call failed (try %d: %s), retrying in %.1fs", attempt + 1, failure, wait
            )
            self._sleep(wait)
        raise AssertionError("unreachable")


@dataclass
class Tally:
    """What one chat call's tries left unaccounted."""

    timed_out: int = 0


def _omitted(metadata: tuple[str, ...]) -> dict[str, str]:
    """The SDK's metadata headers named, each marked for the SDK to leave out."""
    return {f"X-Stainless-{name}": cast(str, openai.Omit()) for name in metadata}


def _malformed(exc: Exception) -> tuple[str, str]:
    """What was wrong with a 200 response, and its body (for the error)."""
    if isinstance(exc, MalformedReply):
        return exc.problem, exc.body
    if isinstance(exc, json.JSONDecodeError):
        return f"the body is not JSON ({exc})", exc.doc
    return f"unexpected shape ({exc})", str(getattr(exc, "body", ""))


def _body_text(exc: openai.APIStatusError) -> str:
    try:
        return exc.response.text
    except Exception:  # a streamed or closed response has no text to show
        return str(exc)


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return min(float(value), 60.0) if value else None
    except ValueError:
        return None
