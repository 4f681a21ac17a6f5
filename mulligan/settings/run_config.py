"""The one run configuration: every setting a command takes, in sections, each defined once.

    endpoint     where the model is and what it costs (mulligan/settings/endpoints.py)
    actor        how the actor talks to it (protocol)
    budget       one attempt's limits (`BudgetSection`, checked before every model call)
    compression  folding old steps (`CompressionSection`)
    loop         trials, the stopping rule, what reflexion carries, retrieval, self-tests
    validity     when a lesson is validated, refuted, expires (`ValiditySection`)
    memory       what a memory arm is shown (candidates, cases), verification's pairs
    run          the memory, its embedding, MCP servers, concurrency
    local        the local model's server: slots, threads (`--model local`)
    escalation   a stronger model `escalate` hands a task to (mulligan/settings/endpoints.py)

A setting is one pydantic field of a section (mulligan/settings/sections.py, endpoints.py): its
type, default, bounds (ge/gt/le/lt) and help (`description`). Its flag (`--field-name`), its
MULLIGAN_FIELD_NAME variable, its mulligan.toml key (`[section] field`), `mulligan config
show` and docs/settings.md are derived from that field (mulligan/settings/fields.py). Adding
a field to a section is all a new setting needs; `json_schema_extra` names a flag or
variable that differs from the field's name (FLAG, ENV, NO_FLAG). A new section is a
`Section` class named after its table (`[budget]`: `BudgetSection`) and a field of `RunConfig`
of the table's name.

Filled by flags over MULLIGAN_* over ./mulligan.toml over the user file over the defaults
(`mulligan.settings.loading` merges them and remembers each value's source). A run's manifest holds
`manifest()`, its dump, and `--resume` compares it field by field.

This module imports only pydantic: the parser derives every command's flags from it, so
`--help` stays fast.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from mulligan.defaults import LESSON_BUDGET, MAX_CHECK_SECONDS, MERGE_SIMILARITY
from mulligan.settings.endpoints import EndpointSection, EscalationSection, ReflectorSection
from mulligan.settings.sections import (
    DETERMINISTIC_TEMPERATURE,
    REPEATED_TEMPERATURE,
    ActorSection,
    BudgetSection,
    CompressionSection,
    LocalSection,
    LoopSection,
    MemorySection,
    RunSection,
    Section,
    ValiditySection,
)

__all__ = [
    "DETERMINISTIC_TEMPERATURE", "REPEATED_TEMPERATURE", "ActorSection", "BudgetSection",
    "CompressionSection", "EndpointSection", "EscalationSection", "LocalSection", "LoopSection",
    "MemorySection", "ReflectorSection", "RunConfig", "RunSection", "Section", "ValiditySection",
]  # fmt: skip


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    endpoint: EndpointSection = Field(default_factory=EndpointSection)
    reflector: ReflectorSection = Field(default_factory=ReflectorSection)
    actor: ActorSection = Field(default_factory=ActorSection)
    budget: BudgetSection = Field(default_factory=BudgetSection)
    compression: CompressionSection = Field(default_factory=CompressionSection)
    loop: LoopSection = Field(default_factory=LoopSection)
    validity: ValiditySection = Field(default_factory=ValiditySection)
    memory: MemorySection = Field(default_factory=MemorySection)
    run: RunSection = Field(default_factory=RunSection)
    local: LocalSection = Field(default_factory=LocalSection)
    escalation: EscalationSection = Field(default_factory=EscalationSection)
    _sources: dict[str, str] = PrivateAttr(default_factory=dict)
    _files: tuple[str, ...] = PrivateAttr(default=())

    def source_of(self, path: str) -> str:
        """Where `section.field` came from: a flag, an environment variable, a file (with
        its line), a command's own default, or "default"."""
        return self._sources.get(path, "default")

    def given(self, path: str) -> bool:
        return path in self._sources

    @property
    def files(self) -> tuple[str, ...]:
        """The settings files it was read from (they may hold an API key)."""
        return self._files

    def updated(self, path: str, value: Any, source: str) -> RunConfig:
        """A copy with one setting changed (a command's own choice), and its source."""
        section, _, name = path.partition(".")
        values = self.model_dump()
        changed = self.model_validate({**values, section: {**values[section], name: value}})
        changed._sources = {**self._sources, path: source}
        changed._files = self._files
        return changed

    def manifest(self) -> dict[str, Any]:
        """The run configuration's dump but for its secrets: a run's manifest holds it, and
        --resume compares it field by field (but for lifecycle.RESUME_MAY_CHANGE)."""
        dump = self.model_dump(mode="json")
        for path in SECRETS:
            section, _, name = path.partition(".")
            dump[section].pop(name, None)
        return dump


class CommandFlags(Section):
    """Numbers a command takes that are not settings (its selection and output): their
    type, default, bounds and help, defined here once like a setting's. No file or
    variable sets them."""

    limit: int | None = Field(default=None, ge=1, description="the first N tasks")
    sample: int | None = Field(default=None, ge=1, description="a seeded random sample of N tasks")
    seed: int = Field(default=0, description="seeds the sample and the task order")
    passes: int = Field(default=1, ge=1, description="run the suite again over the memory")
    repeats: int = Field(
        default=1,
        ge=1,
        description="run the whole study K times over, each repeat drawing its own attempts "
        "(trial 1 too), into one run; the report gives the spread, pass@k and pass^k",
    )
    k: int = Field(default=5, ge=1, description="results for search")
    port: int | None = Field(
        default=None, ge=1, le=65535, description="port on 127.0.0.1 (default: a free one)"
    )
    check_timeout: float = Field(
        default=120.0,
        gt=0,
        le=MAX_CHECK_SECONDS,
        allow_inf_nan=False,
        description="seconds per check",
    )
    lesson_budget: int | None = Field(
        default=None,
        ge=0,
        description=f"the curator keeps the most trusted lessons up to this many tokens "
        f"(default {LESSON_BUDGET})",
    )
    merge_similarity: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description=f"the curator merges lessons at least this similar (default "
        f"{MERGE_SIMILARITY})",
    )


SECRETS = ("endpoint.api_key", "reflector.api_key", "escalation.api_key")
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
