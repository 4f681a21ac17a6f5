"""The sections of the run configuration (mulligan/settings/run_config.py assembles them into
`RunConfig`): each setting is one pydantic field here, with its type, default, bounds and
help; its flag, variable, mulligan.toml key and reference entry are derived from it
(mulligan/settings/fields.py). Imports only pydantic and light modules, so `--help` stays fast.

Names: a table of the settings file is a `<Table>Section`, named after its key and its field of
`RunConfig` (`[budget]`, `RunConfig.budget`: `BudgetSection`). What a component is built with,
composed from sections in mulligan/runs/, is a `<Component>Settings` (`ActorSettings`,
`LoopSettings`, `ServerSettings`). `CommandFlags`, which no file sets, is neither.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mulligan.defaults import MIN_SIMILARITY, Carry

DETERMINISTIC_TEMPERATURE = 0.0
"""The temperature of a run nobody set one for, when each task gets one attempt."""
REPEATED_TEMPERATURE = 0.7
"""... and when a strategy repeats a task over several trials (at 0, a deterministic
endpoint would repeat its first attempt, so `retry` could not differ from `react`), or a study
is repeated (`bench --repeats`: at 0 every repeat would make the same attempts)."""
TEMPERATURE_LADDER = (0.0, 0.3, 0.6, 0.9, 1.2)
"""The rungs `warming` climbs (from greedy decoding up) and `select-diverse` spreads over."""
MAX_CONCURRENCY = 256
"""Tasks at once, at most."""
MAX_TRIALS = 1000
"""Attempts per task, at most: five times the 200 draws a task that pass@100 estimates use, so a
real study fits and a typo (`--trials 1000000`) is refused before a million attempts are planned."""


def FLAG(name: str) -> dict[str, Any]:  # noqa: N802  (read as a marker beside Field)
    """A setting whose flag is not its field's name: `--name`."""
    return {"flag": name}


NO_FLAG: dict[str, Any] = {"flag": None}
"""A setting only mulligan.toml (and its variable, if any) sets."""


def ENV(*names: str) -> dict[str, Any]:  # noqa: N802
    """A setting read from these variables, first found first (not MULLIGAN_<FLAG>)."""
    return {"env": list(names)}


def embedding_problem(spec: str) -> str | None:
    """What is wrong with an embedding spec (`minilm`, `minilm:DIR`, `hash[:N]`, `openai[:M]`)."""
    kind, _, argument = spec.partition(":")
    if kind == "hash":
        if argument and not (argument.isdigit() and 8 <= int(argument) <= 65536):
            return "the size after hash: must be a whole number from 8 to 65536 (e.g. hash:512)"
        return None
    if kind == "minilm":
        if argument and not Path(argument).expanduser().is_dir():
            return f"{argument} is not a directory; give the folder holding model.onnx"
        return None
    if kind == "openai":
        return None
    return "unknown embedding; use minilm, minilm:DIR, openai, openai:MODEL or hash"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ActorSection(Section):
    """How the actor talks to the model."""

    protocol: Literal["native", "text"] = Field(
        default="native", description="tool calling style: native tool calls, or text"
    )


class BudgetSection(Section):
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

    def overridden(self, overrides: BaseModel | None) -> BudgetSection:
        """This budget with a task's own fields (those it sets) over it."""
        if overrides is None:
            return self
        given = {k: v for k, v in overrides.model_dump().items() if v is not None}
        return self.model_copy(update=given)


class CompressionSection(Section):
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

    trials: int = Field(
        default=3, ge=1, le=MAX_TRIALS, description="attempts per task (not for react)"
    )
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
    own_checks_first: bool = Field(
        default=True,
        description="honest stopping reads the task's own feedback-visible checks when it has "
        "any, and the self-tests only on a task with none (off: every feedback-visible check, "
        "the self-tests among them, so a wrong self-test sends a right answer back)",
        json_schema_extra=FLAG("no-own-checks-first"),
    )
    separate: bool = Field(
        default=False,
        description="select: two tied finalists are told apart by an input the model writes (S*)",
    )
    stop_at_pass: bool = Field(
        default=True,
        description="select: stop drawing once a candidate passes every feedback-visible check "
        "(the task's own and every self-test; at least one), and "
        "submit it (off: go on until no further candidate could change the pick, which a full "
        "pass can lose to a larger cluster)",
        json_schema_extra=FLAG("no-stop-at-pass"),
    )
    draw_all: bool = Field(
        default=False,
        description="select: draw all N candidates, even once the first ones decide the pick "
        "(default: stop drawing at a full visible pass, or when no further candidate could "
        "change the pick; all N show what a larger budget would have drawn)",
    )
    escalate_after: int = Field(
        default=2,
        ge=1,
        description="escalate: attempts the actor's model makes before the stronger model "
        "(--escalate-to) takes over the rest",
    )
    temperatures: list[float] = Field(
        default_factory=lambda: list(TEMPERATURE_LADDER),
        min_length=1,
        description="the temperature ladder, comma-separated: warming's attempt k draws at the "
        "k-th rung (the top one past the end), select-diverse's candidates round it in turn",
    )
    probes: Literal["auto", "always", "never"] = Field(
        default="auto",
        description="select: when the model writes inputs to run every candidate on (output "
        "agreement): auto, only for a code task with no feedback-visible check once its "
        "self-tests are written; always; never",
    )

    @field_validator("temperatures", mode="before")
    @classmethod
    def _comma_separated(cls, given: Any) -> Any:
        """`--temperatures 0,0.5,1` (a flag may be given more than once)."""
        if isinstance(given, str):
            given = [given]
        if isinstance(given, list) and all(isinstance(item, str) for item in given):
            return [part.strip() for item in given for part in item.split(",") if part.strip()]
        return given

    @field_validator("temperatures")
    @classmethod
    def _each_a_temperature(cls, ladder: list[float]) -> list[float]:
        wrong = [t for t in ladder if not 0 <= t <= 2]
        if wrong:
            raise ValueError(f"each temperature must be a number from 0 to 2, not {wrong[0]:g}")
        return ladder


class ValiditySection(Section):
    """When a lesson is validated, refuted, or expires."""

    validate_after: int = Field(
        default=2,
        ge=1,
        description="verified pairs a lesson helped in (and more than it hurt in) that validate "
        "it (at 1, noise alone validates a third of the lessons that change nothing)",
    )
    refute_after: int = Field(
        default=1,
        ge=1,
        description="verified pairs a lesson hurt in (and more than it helped in) that refute it",
    )
    ttl_days: float | None = Field(
        default=None,
        gt=0,
        le=36500,
        allow_inf_nan=False,
        description="new lessons expire after this many days (default: never)",
        json_schema_extra=FLAG("lesson-ttl-days"),
    )


class MemorySection(Section):
    """What a memory arm is shown, and how a lesson is verified (docs/memory.md)."""

    show_candidates: bool = Field(
        default=False,
        description="every lesson not yet verified reaches the actor too, from trial 1, "
        "marked unverified (by default a candidate is only tried on later attempts, by "
        "assignment)",
    )
    retrieved_cases: int = Field(
        default=1,
        ge=0,
        description="cases (worked examples) a case-reading arm sees: the most similar",
    )
    verify_pairs: int = Field(
        default=3,
        ge=1,
        description="tasks (one pair each: with the lesson, without) a candidate is verified on",
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


class LocalSection(Section):
    """The local model's server (`--model local`, `local:PATH`): `[local]` in mulligan.toml,
    MULLIGAN_LOCAL_SLOTS, MULLIGAN_LOCAL_THREADS."""

    slots: int | None = Field(
        default=None, ge=1, le=64, json_schema_extra=FLAG("local_slots"),
        description="requests the local model's server answers at once (llama.cpp's "
        "parallel slots; default: the run's --concurrency)",
    )  # fmt: skip
    threads: int | None = Field(
        default=None, ge=1, le=512, json_schema_extra=FLAG("local_threads"),
        description="CPU threads of the local model's server (default: the cores this "
        "process may use)",
    )  # fmt: skip
