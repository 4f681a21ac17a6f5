"""How an OpenAI-compatible endpoint says it will not take part of a request: a form of
`response_format`, `max_tokens`, a sampling seed, a stream. The client (openai_client.py) drops or
changes that part and asks again."""

from __future__ import annotations

from typing import Any

from mulligan.errors import ModelError


def format_forms(response_format: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The forms to try, most standard first."""
    if not response_format:
        return []
    forms = [response_format]
    schema = (response_format.get("json_schema") or {}).get("schema")
    if response_format.get("type") == "json_schema" and schema:
        forms.append({"type": "json_object", "schema": schema})
    return forms


def rejects_format(exc: ModelError) -> bool:
    """The endpoint refused the request's response_format: HTTP 400/422, or an error of
    another status whose body names it (llama-cpp-python 0.3.36 answers HTTP 500)."""
    return exc.status in (400, 422) or (
        exc.status is not None and exc.status >= 400 and "response_format" in (exc.body or "")
    )


def refuses_reply_cap(exc: ModelError, field: str) -> bool:
    """HTTP 400 naming `max_tokens` as unsupported (OpenAI: "Use 'max_completion_tokens'")."""
    return (
        field == "max_tokens"
        and exc.status == 400
        and "max_tokens" in (exc.body or "")
        and "max_completion_tokens" in (exc.body or "")
    )


def refuses_seed(exc: ModelError) -> bool:
    """HTTP 400 or 422 naming `seed`: an endpoint that takes no sampling seed."""
    return exc.status in (400, 422) and "seed" in (exc.body or "").lower()


def refuses_stream(exc: ModelError) -> bool:
    """HTTP 400 or 422 naming the stream or its fields: an endpoint that does not stream."""
    return exc.status in (400, 422) and any(w in (exc.body or "") for w in ("stream", "timings"))
