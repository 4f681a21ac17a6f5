"""The run configuration's [escalation] section (assembled into `RunConfig` beside the
sections of mulligan/settings/sections.py, and read the same way): a stronger model that
takes over `escalate`'s attempts after the actor's model has failed `[loop] escalate_after`
of them."""

from __future__ import annotations

from pydantic import Field, field_validator

from mulligan.settings.sections import FLAG, EndpointSection, Section


class EscalationSection(Section):
    """A stronger model for `escalate` once the actor's attempts failed; its base URL and key
    default to the endpoint's. `local`, `local:0.5b` or `local:PATH.gguf` runs it here."""

    model: str | None = Field(
        default=None,
        json_schema_extra=FLAG("escalate_to"),
        description="the stronger model `escalate` hands a task to after the actor's attempts "
        "(--escalate-after) failed; `local`, `local:0.5b` or `local:PATH.gguf` runs it on this CPU",
    )
    base_url: str | None = Field(
        default=None,
        json_schema_extra=FLAG("escalate_base_url"),
        description="its endpoint (default: the endpoint's)",
    )
    api_key: str | None = Field(
        default=None,
        json_schema_extra=FLAG("escalate_api_key"),
        description="its API key (default: the endpoint's)",
    )

    @field_validator("base_url")
    @classmethod
    def _is_http(cls, url: str | None) -> str | None:
        return EndpointSection._is_http(url)
