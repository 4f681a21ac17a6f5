"""The one run configuration: every setting a command takes, in sections.

    endpoint     where the model is and what it costs (base_url, model, temperature, ...)
    actor        how the actor talks to it (protocol)
    budget       one attempt's limits (actor/budget.py's `Budget`)
    compression  folding old steps (actor/context.py's `CompressionSettings`)
    loop         trials, the stopping rule, what reflexion carries, retrieval, self-tests
    validity     when a lesson is validated, refuted, expires (memory/validity.py)
    memory       what a memory arm is shown (candidates, cases), verification's pairs
    run          the memory, its embedding, MCP servers, concurrency

Filled by flags over MULLIGAN_* over ./mulligan.toml over the user file over the defaults
(`mulligan.config` merges them and remembers each value's source). A run's manifest holds
`manifest()`, the dump of the sections that define what a run computes, and `--resume`
compares it field by field.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from mulligan.actor import ActorSettings, Budget, CompressionSettings
from mulligan.defaults import MIN_SIMILARITY, Carry
from mulligan.loop import LoopSettings
from mulligan.memory.validity import ValidityRules
from mulligan.sandbox import Policy
from mulligan.validate import embedding_problem


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EndpointSettings(Section):
    """Where the model is, which one, and what it costs."""

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2, allow_inf_nan=False)
    timeout: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    price_in: float | None = None
    price_out: float | None = None
    """US dollars per million prompt / completion tokens of the run's model."""
    prices: dict[str, Any] = {}
    """Model name -> {input, output}, dollars per million tokens (`[prices]` in mulligan.toml)."""
    prices_file: str | None = None
    """A JSON file of the same shape (MULLIGAN_PRICES), over `prices`."""

    @field_validator("base_url")
    @classmethod
    def _is_http(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("the endpoint must be an http:// or https:// URL")
        return url


class ActorSection(Section):
    protocol: Literal["native", "text"] = "native"


class LoopSection(Section):
    trials: int = Field(default=3, ge=1)
    stop: Literal["honest", "oracle"] = "honest"
    carry: Carry = "full"
    carried_reflections: int = Field(default=3, ge=0)
    min_similarity: float = Field(default=MIN_SIMILARITY, ge=-1, le=1)
    self_tests: int = Field(default=0, ge=0)


class MemorySection(Section):
    """What a memory arm is shown, and how a lesson is verified (docs/memory.md)."""

    show_candidates: bool = False
    """Lessons not yet verified reach the actor too, marked unverified."""
    retrieved_cases: int = Field(default=1, ge=0)
    """Cases (worked examples) for a strategy that reads them: the most similar, top-1."""
    verify_pairs: int = Field(default=3, ge=1)
    """Tasks (one pair each: with the lesson, without) a candidate is verified on."""


class RunSection(Section):
    memory: str | None = None
    embedding: str = "minilm"
    mcp: list[str] = Field(default_factory=list)
    """Commands that start MCP servers whose tools every task may use."""
    concurrency: int = Field(default=1, ge=1)

    @field_validator("embedding")
    @classmethod
    def _known_embedding(cls, spec: str) -> str:
        problem = embedding_problem(spec)
        if problem:
            raise ValueError(problem)
        return spec


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    endpoint: EndpointSettings = Field(default_factory=EndpointSettings)
    actor: ActorSection = Field(default_factory=ActorSection)
    budget: Budget = Field(default_factory=Budget)
    compression: CompressionSettings = Field(default_factory=CompressionSettings)
    loop: LoopSection = Field(default_factory=LoopSection)
    validity: ValidityRules = Field(default_factory=ValidityRules)
    memory: MemorySection = Field(default_factory=MemorySection)
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
        chosen = self.loop.model_dump(exclude={"self_tests"})
        shown = self.memory.model_dump(exclude={"verify_pairs"})
        return LoopSettings(strategy=strategy, **chosen, **shown, **more)

    def manifest(self) -> dict[str, Any]:
        """What defines a run's results (not where the model is, its key, the memory's
        place or how many tasks run at once): compared field by field on --resume."""
        return self.model_dump(mode="json", include=set(MANIFEST_SECTIONS))


MANIFEST_SECTIONS = ("actor", "budget", "compression", "loop", "validity", "memory")


def section_fields(section: str) -> list[str]:
    kind = RunConfig.model_fields[section].annotation
    if is_dataclass(kind):
        return [f.name for f in fields(kind)]
    assert isinstance(kind, type) and issubclass(kind, BaseModel)
    return list(kind.model_fields)


SECTIONS = tuple(RunConfig.model_fields)

FLAG_NAMES = {
    "compression.enabled": "no_compression",
    "compression.threshold_tokens": "compress_at",
    "compression.summary_max_tokens": "summary_cap",
    "validity.ttl_days": "lesson_ttl_days",
}
"""A setting's flag (argparse dest) where it is not the field's own name."""
NO_FLAG = {
    "endpoint.prices", "compression.threshold_fraction", "compression.fold_to",
    "compression.observation_max_chars",
}  # fmt: skip
"""Settings only mulligan.toml sets."""


def flag_of(path: str) -> str | None:
    """The argparse dest that sets `section.field`, if a flag does."""
    if path in NO_FLAG:
        return None
    return FLAG_NAMES.get(path, path.partition(".")[2])


def every_path() -> list[str]:
    return [f"{section}.{name}" for section in SECTIONS for name in section_fields(section)]


def flag_value(path: str, value: Any) -> Any:
    """A flag's value as the setting it sets (`--no-compression` turns compression off)."""
    return not value if path == "compression.enabled" else value


LEGACY_KEYS = {
    name: f"{section}.{name}"
    for section in ("endpoint", "actor", "run")
    for name in section_fields(section)
    if name != "concurrency"
}
"""Keys mulligan.toml takes at its top level (as before sections), each in its section."""
