"""The run configuration's sections for the models a run talks to (assembled into `RunConfig`
beside those of mulligan/settings/sections.py, and read the same way): `[endpoint]`, the
actor's model; `[reflector]`, a model of its own for reflection, self-tests and selection;
`[escalation]`, a stronger model that takes over `escalate`'s attempts after the actor's model
has failed `[loop] escalate_after` of them."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from mulligan.settings.sections import (
    DETERMINISTIC_TEMPERATURE,
    ENV,
    FLAG,
    NO_FLAG,
    REPEATED_TEMPERATURE,
    Section,
)


class EndpointSection(Section):
    """Where the model is, which one, and what it costs."""

    base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible endpoint",
        json_schema_extra=ENV("MULLIGAN_BASE_URL", "OPENAI_BASE_URL"),
    )
    api_key: str | None = Field(
        default=None,
        description="API key",
        json_schema_extra=ENV("MULLIGAN_API_KEY", "OPENAI_API_KEY"),
    )
    model: str | None = Field(
        default=None,
        description="model name; `local`, `local:0.5b` or `local:PATH.gguf`: llama.cpp on this CPU",
    )
    temperature: float | None = Field(
        default=None,
        ge=0,
        le=2,
        allow_inf_nan=False,
        description=f"sampling temperature (default {DETERMINISTIC_TEMPERATURE}; "
        f"{REPEATED_TEMPERATURE} when a strategy repeats a task over several trials, or a "
        "study is repeated)",
    )
    timeout: float = Field(
        default=120.0, gt=0, allow_inf_nan=False, description="seconds per model call"
    )
    price_in: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="US$ per million prompt tokens"
    )
    price_out: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="US$ per million completion tokens"
    )
    prices: dict[str, Any] = Field(
        default_factory=dict,
        description="model name -> {input, output}, US$ per million tokens",
        json_schema_extra=NO_FLAG,
    )
    prices_file: str | None = Field(
        default=None,
        description="a JSON file of the same shape as `prices`, over it",
        json_schema_extra={**NO_FLAG, **ENV("MULLIGAN_PRICES")},
    )

    @field_validator("base_url")
    @classmethod
    def _is_http(cls, url: str | None) -> str | None:
        if url is None:
            return url
        if not url.startswith(("http://", "https://")):
            raise ValueError("the endpoint must be an http:// or https:// URL")
        try:
            host, _ = urlsplit(url).hostname, urlsplit(url).port  # a bad port raises here
        except ValueError as exc:
            raise ValueError(f"not a URL of a host and port ({exc})") from exc
        if not host:
            raise ValueError("the endpoint URL names no host")
        return url


def its_own(flag: str, what: str) -> Any:
    """A second model's endpoint or API key (`--flag`), by default the endpoint's."""
    shown = f"its {what} (default: the endpoint's)"
    return Field(default=None, json_schema_extra=FLAG(flag), description=shown)


class SecondModelSection(Section):
    """A model beside the actor's (the reflector's, the stronger one `escalate` hands a task
    to): its sections' `model`, `base_url` and `api_key`, the URL checked as the endpoint's."""

    @field_validator("base_url", check_fields=False)
    @classmethod
    def _is_http(cls, url: str | None) -> str | None:
        return EndpointSection._is_http(url)


class ReflectorSection(SecondModelSection):
    """A feedback model of its own for the reflector, the self-test writer, a selection's
    input writer and the curator (unset: the actor's model); its base URL and key default to
    the endpoint's. `local`, `local:0.5b` or `local:PATH.gguf` runs it on this machine."""

    model: str | None = Field(
        default=None,
        json_schema_extra=FLAG("reflector_model"),
        description="a model of its own for the reflector, self-tests, selection inputs and "
        "curator (default: the actor's); `local`, `local:0.5b` or `local:PATH.gguf` runs it on "
        "this CPU",
    )
    base_url: str | None = its_own("reflector_base_url", "endpoint")
    api_key: str | None = its_own("reflector_api_key", "API key")


class EscalationSection(SecondModelSection):
    """A stronger model for `escalate` once the actor's attempts failed; its base URL and key
    default to the endpoint's. `local`, `local:0.5b` or `local:PATH.gguf` runs it here."""

    model: str | None = Field(
        default=None,
        json_schema_extra=FLAG("escalate_to"),
        description="the stronger model `escalate` hands a task to after the actor's attempts "
        "(--escalate-after) failed; `local`, `local:0.5b` or `local:PATH.gguf` runs it on this CPU",
    )
    base_url: str | None = its_own("escalate_base_url", "endpoint")
    api_key: str | None = its_own("escalate_api_key", "API key")
