"""The one run configuration: every setting a command takes, in sections, each defined once.

    endpoint     where the model is and what it costs (base_url, model, temperature, ...)
    actor        how the actor talks to it (protocol)
    budget       one attempt's limits (`Budget`, checked before every model call)
    compression  folding old steps (`CompressionSettings`)
    loop         trials, the stopping rule, what reflexion carries, retrieval, self-tests
    validity     when a lesson is validated, refuted, expires (`ValidityRules`)
    run          the memory, its embedding, MCP servers, concurrency

A setting is one pydantic field of a section: its type, default, bounds (ge/gt/le/lt) and
help (`description`). Its flag (`--field-name`), its MULLIGAN_FIELD_NAME variable, its
mulligan.toml key (`[section] field`), `mulligan config show` and docs/settings.md are
derived from that field (mulligan/settings_fields.py). Adding a field to a section is all
a new setting needs; `json_schema_extra` names a flag or variable that differs from the
field's name (FLAG, ENV, NO_FLAG below). A new section is a `Section` class and a field of
`RunConfig`.

Filled by flags over MULLIGAN_* over ./mulligan.toml over the user file over the defaults
(`mulligan.config` merges them and remembers each value's source). A run's manifest holds
`manifest()`, its dump, and `--resume` compares it field by field.

This module imports only pydantic: the parser derives every command's flags from it, so
`--help` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from mulligan.defaults import MIN_SIMILARITY, Carry
from mulligan.inputs.embedding import embedding_problem

if TYPE_CHECKING:
    from mulligan.actor import ActorSettings
    from mulligan.loop import LoopSettings
    from mulligan.sandbox import Policy

DETERMINISTIC_TEMPERATURE = 0.0
"""The temperature of a run nobody set one for, when each task gets one attempt."""
REPEATED_TEMPERATURE = 0.7
"""... and when a strategy repeats a task over several trials (at 0, a deterministic
endpoint would repeat its first attempt, so `retry` could not differ from `react`)."""
MAX_CONCURRENCY = 256
"""Tasks at once, at most."""


def FLAG(name: str) -> dict[str, Any]:  # noqa: N802  (read as a marker beside Field)
    """A setting whose flag is not its field's name: `--name`."""
    return {"flag": name}


NO_FLAG: dict[str, Any] = {"flag": None}
"""A setting only mulligan.toml (and its variable, if any) sets."""


def ENV(*names: str) -> dict[str, Any]:  # noqa: N802
    """A setting read from these variables, first found first (not MULLIGAN_<FLAG>)."""
    return {"env": list(names)}


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class EndpointSettings(Section):
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
        description="model name; `local` or `local:PATH.gguf`: llama.cpp on this CPU",
    )
    temperature: float | None = Field(
        default=None,
        ge=0,
        le=2,
        allow_inf_nan=False,
        description=f"sampling temperature (default {DETERMINISTIC_TEMPERATURE}; "
        f"{REPEATED_TEMPERATURE} when a strategy repeats a task over several trials)",
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
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("the endpoint must be an http:// or https:// URL")
        return url


class ActorSection(Section):
    """How the actor talks to the model."""

    protocol: Literal["native", "text"] = Field(
        default="native", description="tool calling style: native tool calls, or text"
    )


class Budget(Section):
    """One attempt's limits, checked before every model call (they override a task's own)."""

    max_steps: int = Field(default=12, ge=1, description="model calls per attempt")
    max_tokens: int = Field(default=60_000, ge=1, description="tokens per attempt")
    max_seconds: float = Field(
        default=600.0, gt=0, allow_inf_nan=False, description="seconds per attempt"
    )
    max_cost: float = Field(default=1.0, ge=0, allow_inf_nan=False, description="US$ per attempt")
    max_format_errors: int = Field(
        default=3, ge=1, description="replies in a row the text protocol cannot read"
    )
    max_repeats: int = Field(
        default=3,
        ge=1,
        description="steps in a row that only repeat calls already made; then the next call "
        "is the last, as at the step limit",
    )
    max_reply_tokens: int = Field(
        default=2048, ge=1, description="cap on each model reply (a reply cut there is told so)"
    )

    def overridden(self, overrides: BaseModel | None) -> Budget:
        """This budget with a task's own fields (those it sets) over it."""
        if overrides is None:
            return self
        given = {k: v for k, v in overrides.model_dump().items() if v is not None}
        return self.model_copy(update=given)

    @classmethod
    def field_names(cls) -> list[str]:
        return list(cls.model_fields)


class CompressionSettings(Section):
    """Folding the oldest steps into a running summary when the view grows too large."""

    enabled: bool = Field(
        default=True, description="send the full history", json_schema_extra=FLAG("no-compression")
    )
    threshold_tokens: int = Field(
        default=4000,
        ge=1,
        description="fold old steps above this many tokens",
        json_schema_extra=FLAG("compress-at"),
    )
    context_window: int | None = Field(
        default=None, ge=1, description="the model's context, in tokens"
    )
    threshold_fraction: float = Field(
        default=0.6,
        gt=0,
        le=1,
        description="with a known context window, the threshold is at most this fraction of it",
        json_schema_extra=NO_FLAG,
    )
    keep_recent: int = Field(default=3, ge=0, description="steps always kept verbatim")
    summary_max_tokens: int = Field(
        default=600,
        ge=1,
        description="the running summary's token cap",
        json_schema_extra=FLAG("summary-cap"),
    )
    fold_to: float = Field(
        default=0.6,
        gt=0,
        lt=1,
        description="a fold brings the view down to this fraction of the threshold",
        json_schema_extra=NO_FLAG,
    )
    observation_max_chars: int = Field(
        default=4000,
        ge=1,
        description="a tool result longer than this is cut, visibly",
        json_schema_extra=NO_FLAG,
    )

    def threshold(self) -> int:
        if self.context_window:
            return min(self.threshold_tokens, int(self.context_window * self.threshold_fraction))
        return self.threshold_tokens


class LoopSection(Section):
    """The outer loop: trials, the stopping rule, carry-over, retrieval, self-tests."""

    trials: int = Field(default=3, ge=1, description="attempts per task (not for react)")
    stop: Literal["honest", "oracle"] = Field(
        default="honest",
        description="when an episode ends: honest (at the first attempt whose visible checks "
        "pass) or oracle (the hidden checks decide whether to try again, as some papers do)",
    )
    carry: Carry = Field(
        default="full",
        description="what reflexion gives the next attempt: full (previous answer, visible "
        "feedback, reflections) or lessons (reflections only)",
    )
    carried_reflections: int = Field(
        default=3, ge=0, description="reflections carried (reflexion; 0: none)"
    )
    min_similarity: float = Field(
        default=MIN_SIMILARITY,
        ge=-1,
        le=1,
        description="a stored lesson less similar to the task is not retrieved (solve: 0, as "
        "its lessons are the project's own)",
    )
    self_tests: int = Field(
        default=0,
        ge=0,
        description="before trial 1 the model writes up to N asserts from the prompt alone; "
        "they are visible checks of every attempt (Reflexion's internal tests; code tasks)",
    )


class ValidityRules(Section):
    """When a lesson is validated, refuted, or expires."""

    validate_after: int = Field(
        default=2, ge=1, description="helps (with more help than harm) that validate a lesson"
    )
    refute_after: int = Field(
        default=3, ge=1, description="hurts (with more harm than help) that refute a lesson"
    )
    ttl_days: float | None = Field(
        default=None,
        gt=0,
        le=36500,
        allow_inf_nan=False,
        description="new lessons expire after this many days (default: never)",
        json_schema_extra=FLAG("lesson-ttl-days"),
    )


class RunSection(Section):
    """The memory, its embedding, MCP servers, concurrency."""

    memory: str | None = Field(
        default=None,
        description="memory directory or chroma URL (default ~/.mulligan; bench: OUT/memory)",
    )
    embedding: str = Field(
        default="minilm", description="minilm, minilm:DIR, openai, openai:MODEL or hash[:N]"
    )
    mcp: list[str] = Field(
        default_factory=list,
        description="start an MCP server (stdio) and offer its tools as SERVER_TOOL: "
        "'python srv.py' or 'NAME=python srv.py' (repeatable)",
    )
    concurrency: int = Field(default=1, ge=1, le=MAX_CONCURRENCY, description="tasks at once")

    @field_validator("embedding")
    @classmethod
    def _known_embedding(cls, spec: str) -> str:
        problem = embedding_problem(spec)
        if problem:
            raise ValueError(problem)
        return spec


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    endpoint: EndpointSettings = Field(default_factory=EndpointSettings)
    actor: ActorSection = Field(default_factory=ActorSection)
    budget: Budget = Field(default_factory=Budget)
    compression: CompressionSettings = Field(default_factory=CompressionSettings)
    loop: LoopSection = Field(default_factory=LoopSection)
    validity: ValidityRules = Field(default_factory=ValidityRules)
    run: RunSection = Field(default_factory=RunSection)
    _sources: dict[str, str] = PrivateAttr(default_factory=dict)
    _files: tuple[str, ...] = PrivateAttr(default=())

    def source_of(self, path: str) -> str:
        """Where `section.field` came from: a flag, an environment variable, a file (with
        its line), a command's own default, or "default"."""
        return self._sources.get(path, "default")

    def given(self, path: str) -> bool:
        return path in self._sources

    def policy(self) -> Policy:
        """What the box hides for a run under this configuration: the settings files it
        was read from (they may hold an API key)."""
        from mulligan.sandbox import Policy

        return Policy().hiding(*self._files)

    def updated(self, path: str, value: Any, source: str) -> RunConfig:
        """A copy with one setting changed (a command's own choice), and its source."""
        section, _, name = path.partition(".")
        values = self.model_dump()
        changed = self.model_validate({**values, section: {**values[section], name: value}})
        changed._sources = {**self._sources, path: source}
        changed._files = self._files
        return changed

    def actor_settings(self, **more: Any) -> ActorSettings:
        """The actor's settings; the budget fields given anywhere override a task's own."""
        from mulligan.actor import ActorSettings

        forced = tuple(name for name in Budget.field_names() if self.given(f"budget.{name}"))
        return ActorSettings(
            protocol=self.actor.protocol,
            budget=self.budget,
            forced=forced,
            compression=self.compression,
            **more,
        )

    def loop_settings(self, strategy: str, **more: Any) -> LoopSettings:
        """The loop's settings for one strategy (`more`: what the command adds, such as
        extra tools or where attempts work)."""
        from mulligan.loop import LoopSettings

        return LoopSettings(strategy=strategy, **self.loop.model_dump(), **more)

    def manifest(self) -> dict[str, Any]:
        """The run configuration's dump but for its secrets: a run's manifest holds it, and
        --resume compares it field by field (but for lifecycle.RESUME_MAY_CHANGE)."""
        dump = self.model_dump(mode="json")
        for path in SECRETS:
            section, _, name = path.partition(".")
            dump[section].pop(name, None)
        return dump


SECRETS = ("endpoint.api_key",)
"""Settings a manifest, `config show` and the settings reference never show."""
SECTIONS = tuple(RunConfig.model_fields)


def section_model(section: str) -> type[Section]:
    kind = RunConfig.model_fields[section].annotation
    assert isinstance(kind, type) and issubclass(kind, Section)
    return kind


def section_fields(section: str) -> list[str]:
    return list(section_model(section).model_fields)


def every_path() -> list[str]:
    return [f"{section}.{name}" for section in SECTIONS for name in section_fields(section)]


LEGACY_KEYS = {
    name: f"{section}.{name}"
    for section in ("endpoint", "actor", "run")
    for name in section_fields(section)
    if name != "concurrency"
}
"""Keys mulligan.toml takes at its top level (as before sections), each in its section."""
