"""The checks a task carries, their results and the verdict on an attempt."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from mulligan.defaults import MAX_CHECK_SECONDS
from mulligan.schema.records import Attempt, Record

Visibility = Literal["feedback", "hidden"]


class CheckBase(Record):
    visibility: Visibility = "feedback"
    name: str = ""
    reveal: bool = False
    """Whether a failure's detail may name the expected value (an answer handed over in
    feedback makes the next trial worthless as evidence, so only where the task says so)."""

    @property
    def in_workspace(self) -> bool:
        """It runs in the attempt's workspace (a task without one gets an empty one)."""
        return isinstance(self, CommandCheck | FileCheck) or (
            isinstance(self, PythonTestsCheck) and bool(self.file)
        )


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

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("blank: every answer would pass; give the text the answer must hold")
        return text


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
    timeout: float = Field(default=10.0, gt=0, le=MAX_CHECK_SECONDS, allow_inf_nan=False)


class CommandCheck(CheckBase):
    type: Literal["command"] = "command"
    command: str
    timeout: float = Field(default=30.0, gt=0, le=MAX_CHECK_SECONDS, allow_inf_nan=False)


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
    def own_passed(self) -> bool | None:
        """Every feedback-visible check of the task's own passed, the model's self-tests left
        out (None: the task has none)."""
        own = [c for c in self.checks if c.visibility == "feedback" and not c.self_test]
        return all(c.passed for c in own) if own else None

    @property
    def failed_visible(self) -> list[str]:  # a hidden check is never named
        return [c.name for c in self.checks if c.visibility == "feedback" and not c.passed]

    @property
    def environment_failed(self) -> bool:
        """A feedback-visible check could not start. A hidden one that could not start is a
        failed check in the score and nothing more: what the agent does next may not depend
        on a hidden check (see `hidden_unrun`)."""
        return any(
            c.environment and not c.passed for c in self.checks if c.visibility == "feedback"
        )

    @property
    def hidden_unrun(self) -> list[str]:
        """Hidden checks that could not start: the score holds them as failed; reports say so."""
        return [c.name for c in self.checks if c.visibility == "hidden" and c.environment]


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
