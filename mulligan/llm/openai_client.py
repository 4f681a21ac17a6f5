"""The OpenAI-compatible chat client: the only module that imports openai."""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import openai

from mulligan.errors import ModelError
from mulligan.llm.base import ChatResponse, Message
from mulligan.llm.pricing import cost_of
from mulligan.schema import ToolCall, Usage

log = logging.getLogger("mulligan")

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}


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
    ) -> None:
        self.name = model
        self.temperature = temperature
        self.max_retries = max_retries
        self.backoff = backoff
        self._sleep = sleep
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=0
        )
        self.base_url = str(self._client.base_url)
        self.rejected_formats = 0
        """How many forms of response_format this endpoint rejected (see `_structured`)."""

    def chat(
        self,
        messages: list[Message],
        *,
        tools: list[dict[str, Any]] | None = None,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> ChatResponse:
        kwargs: dict[str, Any] = {"model": self.name, "messages": messages}
        kwargs["temperature"] = self.temperature
        if tools:
            kwargs["tools"] = tools
        if stop:
            kwargs["stop"] = stop
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        started = time.perf_counter()
        completion = self._structured(kwargs, response_format)
        latency = time.perf_counter() - started
        return self._parse(completion, latency)

    def _structured(
        self, body: dict[str, Any], response_format: dict[str, Any] | None
    ) -> dict[str, Any]:
        """Ask with `response_format` in the first form this endpoint has not rejected.

        OpenAI, vLLM, Ollama and llama.cpp's server take a `json_schema`; llama-cpp-python's
        server takes `json_object` with a `schema` and answers the other with HTTP 422. A form
        rejected (HTTP 400 or 422) is remembered and not sent again; when every form was
        rejected the request goes in plain text.
        """
        for form in _format_forms(response_format)[self.rejected_formats :]:
            try:
                return self._with_retries(
                    lambda form=form: self._post_chat({**body, "response_format": form})  # type: ignore[misc]
                )
            except ModelError as exc:
                if exc.status not in (400, 422):
                    raise
                self.rejected_formats += 1
                log.warning(
                    "endpoint rejected response_format %s (HTTP %s)", form["type"], exc.status
                )
        return self._with_retries(lambda: self._post_chat(body))

    def _post_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /chat/completions through the SDK's client (auth, timeouts, errors).

        `chat.completions.create` walks every message through the SDK's TypedDict
        transform and builds its pydantic models for the reply, ~1 ms per call on a
        long history; our messages are plain JSON already and the reply is read here.
        """
        reply = self._client.post("/chat/completions", body=body, cast_to=dict)
        return reply if isinstance(reply, dict) else {}

    def list_models(self) -> list[str]:
        return [m.id for m in self._with_retries(lambda: self._client.models.list()).data]

    def embed(self, texts: list[str]) -> list[list[float]]:
        result = self._with_retries(
            lambda: self._client.embeddings.create(model=self.name, input=texts)
        )
        return [list(item.embedding) for item in result.data]

    def _with_retries(self, call: Callable[[], Any]) -> Any:
        for attempt in range(self.max_retries + 1):
            try:
                return call()
            except openai.APIStatusError as exc:
                status, body = exc.status_code, _body_text(exc)
                if status not in RETRYABLE_STATUS or attempt == self.max_retries:
                    raise ModelError(
                        f"endpoint answered HTTP {status} after {attempt + 1} tries: {body[:300]}",
                        status=status,
                        body=body,
                    ) from exc
                wait = _retry_after(exc) or self.backoff * 2**attempt * (1 + random.random() / 4)
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                if attempt == self.max_retries:
                    kind = "timed out" if isinstance(exc, openai.APITimeoutError) else "unreachable"
                    raise ModelError(
                        f"endpoint {self.base_url} {kind} after {attempt + 1} tries: {exc}"
                    ) from exc
                wait = self.backoff * 2**attempt
            log.warning("model call failed (try %d), retrying in %.1fs", attempt + 1, wait)
            self._sleep(wait)
        raise AssertionError("unreachable")

    def _parse(self, completion: dict[str, Any], latency: float) -> ChatResponse:
        choices = completion.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            raise ModelError(f"endpoint returned no choices: {str(completion)[:300]}")
        choice = choices[0]
        message = choice.get("message") or {}
        calls = [
            ToolCall(
                id=call.get("id") or f"call_{index}",
                name=(call.get("function") or {}).get("name") or "",
                arguments=_arguments_text((call.get("function") or {}).get("arguments")),
            )
            for index, call in enumerate(message.get("tool_calls") or [])
        ]
        usage = Usage()
        reported = completion.get("usage") or {}
        if reported:
            prompt = int(reported.get("prompt_tokens") or 0)
            reply = int(reported.get("completion_tokens") or 0)
            usage = Usage(
                prompt_tokens=prompt,
                completion_tokens=reply,
                cost=cost_of(self.name, prompt, reply),
            )
        return ChatResponse(
            text=message.get("content") or "",
            tool_calls=calls,
            finish_reason=choice.get("finish_reason") or "stop",
            usage=usage,
            latency_s=latency,
        )


def _format_forms(response_format: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The forms to try, most standard first."""
    if not response_format:
        return []
    forms = [response_format]
    schema = (response_format.get("json_schema") or {}).get("schema")
    if response_format.get("type") == "json_schema" and schema:
        forms.append({"type": "json_object", "schema": schema})
    return forms


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


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
