"""The pydantic records that pass between components."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mulligan.text_cut import head


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- usage & steps


class Usage(Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    """US dollars; None when the model's price is unknown (then any sum with it is unknown)."""
    unmetered_calls: int = 0
    """Requests sent whose usage the endpoint never reported (the call timed out after it was
    sent): the endpoint may have spent, and billed, tokens that are not in these counts."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost=cost,
            unmetered_calls=self.unmetered_calls + other.unmetered_calls,
        )

    def unmetered_text(self) -> str:
        """ " · N calls unmetered" when some call's usage was never reported, else nothing."""
        n = self.unmetered_calls
        return f" · {n} call{'s' if n != 1 else ''} unmetered (timed out)" if n else ""

    @staticmethod
    def total(usages: Iterable[Usage]) -> Usage:
        return sum(usages, Usage())

    def cost_text(self) -> str:
        return "cost unknown" if self.cost is None else f"${self.cost:.4f}"

    def as_json(self) -> dict[str, Any]:
        return self.model_dump() | {"total_tokens": self.total_tokens}


Role = Literal["actor", "summariser", "reflector", "judge", "tester"]
"""Who made a model call: the actor, context compression, reflections and insights,
llm_judge checks, self-tests."""


def add_by_role(*parts: dict[Role, Usage]) -> dict[Role, Usage]:
    """Usage per role, summed over `parts`."""
    merged: dict[Role, Usage] = {}
    for part in parts:
        for role, usage in part.items():
            merged[role] = merged.get(role, Usage()) + usage
    return merged


class ToolCall(Record):
    id: str
    name: str
    arguments: str = "{}"
    """The arguments exactly as the model wrote them (JSON text, maybe malformed)."""


ToolStatus = Literal["ok", "error", "timeout", "denied", "repeated", "interrupted"]


class ToolResult(Record):
    call_id: str
    name: str
    status: ToolStatus
    output: str
    seconds: float = 0.0


class Step(Record):
    """One model turn and the results of the tool calls it made."""

    index: int
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    results: list[ToolResult] = Field(default_factory=list)
    kind: Literal["act", "final", "format_error", "summary"] = "act"
    feedback: str = ""
    """What the actor told the model after this turn besides tool results (format reminders)."""
    usage: Usage = Field(default_factory=Usage)
    fold_usage: Usage = Field(default_factory=Usage)
    """What folding older steps into the running summary cost just before this turn."""
    latency_s: float = 0.0
    finish_reason: str = ""

    def as_text(self, per_item: int = 2000) -> str:
        """The step as plain text (for the summariser, the reflector and people)."""
        lines = [f"Step {self.index}:"]
        if self.text.strip():
            lines.append(f"  said: {head(self.text, per_item)}")
        lines += [f"  called {c.name}({head(c.arguments, per_item)})" for c in self.tool_calls]
        lines += [f"  -> {r.status}: {head(r.output, per_item)}" for r in self.results]
        return "\n".join(lines)


class CompressionEvent(Record):
    before_step: int
    folded_steps: list[int]
    tokens_before: int
    tokens_after: int
    summary: str
    method: Literal["model", "extractive"]


StopReason = Literal[
    "answered",
    "max_steps",
    "max_tokens",
    "max_seconds",
    "max_cost",
    "format_errors",
    "model_error",
]


class Attempt(Record):
    task_id: str
    trial: int = 1
    steps: list[Step] = Field(default_factory=list)
    answer: str | None = None
    stop_reason: StopReason = "answered"
    final_forced: bool = False
    """The answer came from the last call, made without tools because the budget ran out."""
    error: str = ""
    usage: Usage = Field(default_factory=Usage)
    """Every model call this attempt caused (the sum of `usage_by_role`)."""
    usage_by_role: dict[Role, Usage] = Field(default_factory=dict)
    """The actor's and summariser's calls, the judge's on its verdict, the reflector's on it."""
    seconds: float = 0.0
    model: str = ""
    protocol: Literal["native", "text"] = "native"
    lesson_ids: list[str] = Field(default_factory=list)
    compressions: list[CompressionEvent] = Field(default_factory=list)
    workspace: str | None = None
    changes: str = ""
    """What the attempt changed in its copy of a project, as a unified diff (`solve`)."""

    def charge(self, role: Role, usage: Usage) -> None:
        """Count a call made for this attempt (after it: judging it, reflecting on it)."""
        self.usage_by_role = add_by_role(self.usage_by_role, {role: usage})
        self.usage = self.usage + usage


# ---------------------------------------------------------------- checks

Visibility = Literal["feedback", "hidden"]


class CheckBase(Record):
    visibility: Visibility = "feedback"
    name: str = ""
    reveal: bool = False
    """Whether a failure's detail may name the expected value (an answer handed over in
    feedback makes the next trial worthless as evidence, so only where the task says so)."""


def _compiles(pattern: str | None) -> str | None:
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"bad regex {pattern!r}: {exc}") from exc
    return pattern


class ExactMatchCheck(CheckBase):
    type: Literal["exact_match"] = "exact_match"
    answer: str | list[str]


class ContainsCheck(CheckBase):
    type: Literal["contains"] = "contains"
    text: str
    case_sensitive: bool = False


class RegexCheck(CheckBase):
    type: Literal["regex"] = "regex"
    pattern: str
    flags: str = ""

    _pattern_compiles = field_validator("pattern")(_compiles)


class NumericCheck(CheckBase):
    type: Literal["numeric"] = "numeric"
    value: float = Field(allow_inf_nan=False)
    abs_tol: float = Field(default=1e-6, ge=0, allow_inf_nan=False)
    rel_tol: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    pick: Literal["any", "first", "last"] = "any"
    """Which number of the answer must match."""


class PythonTestsCheck(CheckBase):
    type: Literal["python_tests"] = "python_tests"
    tests: str
    entry_point: str | None = None
    file: str | None = None
    """Take the candidate from this workspace file instead of the answer's last code block."""
    prelude: str = ""
    timeout: float = Field(default=10.0, gt=0, allow_inf_nan=False)


class CommandCheck(CheckBase):
    type: Literal["command"] = "command"
    command: str
    timeout: float = Field(default=30.0, gt=0, allow_inf_nan=False)


class FileCheck(CheckBase):
    type: Literal["file"] = "file"
    path: str
    contains: str | None = None
    matches: str | None = None

    _matches_compiles = field_validator("matches")(_compiles)


class LLMJudgeCheck(CheckBase):
    type: Literal["llm_judge"] = "llm_judge"
    rubric: str


class CallableCheck(CheckBase):
    type: Literal["callable"] = "callable"
    function: str
    """`module:function` called with (answer, attempt, workspace); returns bool or CheckResult."""


Check = Annotated[
    ExactMatchCheck
    | ContainsCheck
    | RegexCheck
    | NumericCheck
    | PythonTestsCheck
    | CommandCheck
    | FileCheck
    | LLMJudgeCheck
    | CallableCheck,
    Field(discriminator="type"),
]


SELF_TEST = "self-test"
"""The name every self-test check starts with: the model's own tests (`--self-tests`), which
decide whether to try again like any visible check and never count in the score."""


class CheckResult(Record):
    type: str
    name: str = ""
    visibility: Visibility = "feedback"
    passed: bool
    score: float
    detail: str = ""
    environment: bool = False
    """It failed for a reason the attempt could not cause: the check could not start."""

    @property
    def self_test(self) -> bool:
        return self.name.startswith(SELF_TEST)


class Verdict(Record):
    passed: bool
    """Every check of the task passed, hidden ones included, the model's own self-tests left
    out: the score, never a reason to try again."""
    score: float
    checks: list[CheckResult] = Field(default_factory=list)
    feedback: str = ""

    @classmethod
    def of(cls, checks: list[CheckResult], feedback: str = "") -> Verdict:
        passed, score = _scored(checks)
        return cls(passed=passed, score=score, checks=checks, feedback=feedback)

    @model_validator(mode="after")
    def _self_tests_never_score(self) -> Verdict:
        """Also for verdicts logged before the score left the self-tests out."""
        if any(c.self_test for c in self.checks):
            self.passed, self.score = _scored(self.checks)
        return self

    @property
    def visible_passed(self) -> bool | None:
        """Every feedback-visible check passed: the evidence an agent has (None: it has none)."""
        visible = [c for c in self.checks if c.visibility == "feedback"]
        return all(c.passed for c in visible) if visible else None

    @property
    def failed_visible(self) -> list[str]:  # a hidden check is never named
        return [c.name for c in self.checks if c.visibility == "feedback" and not c.passed]

    @property
    def environment_failed(self) -> bool:  # a check could not start
        return any(c.environment and not c.passed for c in self.checks)


def _scored(checks: list[CheckResult]) -> tuple[bool, float]:
    """(passed, score) over the task's own checks."""
    own = [c for c in checks if not c.self_test]
    if not own:
        return False, 0.0
    return all(c.passed for c in own), sum(c.score for c in own) / len(own)


def tells_nothing(attempt: Attempt, verdict: Verdict) -> bool:
    """No evidence about the task (the endpoint failed, a check could not start): nothing is
    reflected on, and no lesson counted helped or hurt, after it."""
    return attempt.stop_reason == "model_error" or verdict.environment_failed


# ---------------------------------------------------------------- tasks


class BudgetOverrides(Record):
    max_steps: int | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    max_seconds: float | None = Field(default=None, gt=0)
    max_cost: float | None = Field(default=None, ge=0)
    max_format_errors: int | None = Field(default=None, gt=0)
    max_reply_tokens: int | None = Field(default=None, gt=0)


class Task(Record):
    id: str
    family: str = "custom"
    prompt: str
    tools: list[str] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    workspace: dict[str, str] | None = None
    """Relative path -> file content, laid out in a fresh scratch directory before each attempt."""
    documents: dict[str, str] | None = None
    """Title -> text: the closed corpus for the `search`/`lookup` tools."""
    budget: BudgetOverrides | None = None
    network: bool = False
    """Let the box reach the network (its tools and its checks); off by default."""
    mcp: list[str] = Field(default_factory=list)
    """Commands that start MCP servers (stdio) whose tools this task may use."""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("checks")
    @classmethod
    def _no_check_named_as_a_self_test(cls, checks: list[Check]) -> list[Check]:
        for check in checks:
            if check.name.startswith(SELF_TEST):
                raise ValueError(
                    f"check name {check.name!r}: names starting {SELF_TEST!r} are kept for "
                    "the model's own tests (--self-tests), which never count in the score; "
                    "rename the check"
                )
        return checks


# ---------------------------------------------------------------- lessons

LessonStatus = Literal["candidate", "validated", "refuted", "superseded", "expired", "retracted"]


class LessonScope(Record):
    family: str = ""
    task_id: str = ""
    tags: list[str] = Field(default_factory=list)


class LessonSource(Record):
    episode_id: str = ""
    task_id: str = ""
    trial: int = 0
    model: str = ""
    created_at: float = Field(default_factory=time.time)
    failed_checks: list[str] = Field(default_factory=list)


class LessonValidity(Record):
    status: LessonStatus = "candidate"
    retrieved: int = 0
    helped: int = 0
    hurt: int = 0
    reinforced: int = 0
    """Times the reflector wrote this lesson again (its twin was folded into it)."""
    expires_at: float | None = None
    superseded_by: str | None = None

    @property
    def confidence(self) -> float:
        """Laplace-smoothed share of uses that passed; being written again counts half a help."""
        support = self.helped + 0.5 * self.reinforced
        return (support + 1) / (support + self.hurt + 2)


class Lesson(Record):
    id: str
    text: str
    kind: Literal["failure", "insight", "diagnosis"] = "failure"
    """`diagnosis`: specific to one attempt, carried within its episode, never stored for
    other tasks; `failure` and `insight` are general lessons."""
    scope: LessonScope = Field(default_factory=LessonScope)
    source: LessonSource = Field(default_factory=LessonSource)
    validity: LessonValidity = Field(default_factory=LessonValidity)


class Episode(Record):
    id: str
    run_id: str = ""
    task_id: str
    strategy: str
    attempts: list[Attempt] = Field(default_factory=list)
    verdicts: list[Verdict] = Field(default_factory=list)
    lessons_written: list[str] = Field(default_factory=list)
    passed: bool = False

    @property
    def usage(self) -> Usage:
        """Every model call the episode caused, all roles."""
        return Usage.total(a.usage for a in self.attempts)

    @property
    def usage_by_role(self) -> dict[Role, Usage]:
        return add_by_role(*(a.usage_by_role for a in self.attempts))
