"""The pydantic records that pass between components (one import for all of them)."""

from __future__ import annotations

import ast
import contextlib
import re
import time
from typing import Any, Literal, Optional

from pydantic import BaseModel, Field, create_model, field_validator

from mulligan.schema.checks import SELF_TEST, Check, PythonTestsCheck, Verdict
from mulligan.schema.checks import CallableCheck as CallableCheck
from mulligan.schema.checks import CheckBase as CheckBase
from mulligan.schema.checks import CheckResult as CheckResult
from mulligan.schema.checks import CommandCheck as CommandCheck
from mulligan.schema.checks import ContainsCheck as ContainsCheck
from mulligan.schema.checks import ExactMatchCheck as ExactMatchCheck
from mulligan.schema.checks import FileCheck as FileCheck
from mulligan.schema.checks import LLMJudgeCheck as LLMJudgeCheck
from mulligan.schema.checks import NumericCheck as NumericCheck
from mulligan.schema.checks import RegexCheck as RegexCheck
from mulligan.schema.checks import Visibility as Visibility
from mulligan.schema.checks import tells_nothing as tells_nothing
from mulligan.schema.records import Attempt, Record, Role, Selection, Usage, add_by_role
from mulligan.schema.records import CompressionEvent as CompressionEvent
from mulligan.schema.records import Step as Step
from mulligan.schema.records import StopReason as StopReason
from mulligan.schema.records import ToolCall as ToolCall
from mulligan.schema.records import ToolResult as ToolResult
from mulligan.schema.records import ToolStatus as ToolStatus
from mulligan.settings.run_config import BudgetSection

# ---------------------------------------------------------------- tasks

CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")
"""Never in an id or a workspace path: a newline splits a line of a report, a NUL a path."""


def _overrides_of(budget: type[BaseModel]) -> type[Record]:
    """A task's own budget: every field of `budget`, optional, with its bounds, and strict
    (`max_steps: true` is a mistake, not one step)."""

    def bounds(info: Any) -> dict[str, Any]:
        keys = ("ge", "gt", "le", "lt", "allow_inf_nan")
        return {k: getattr(m, k) for m in info.metadata for k in keys if hasattr(m, k)}

    fields: dict[str, Any] = {
        name: (
            Optional[info.annotation],  # noqa: UP045  (a type made at run time)
            Field(default=None, strict=True, description=info.description, **bounds(info)),
        )
        for name, info in budget.model_fields.items()
    }
    return create_model("BudgetOverrides", __base__=Record, **fields)


class BudgetOverrides(_overrides_of(BudgetSection)):  # type: ignore[misc]
    """A task's own budget: the run configuration's `BudgetSection` fields, each optional."""


class CodeTarget(Record):
    """The function a code task asks for, as far as the agent may know it."""

    entry_point: str
    prelude: str = ""


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

    @field_validator("id")
    @classmethod
    def _id_is_one_line(cls, value: str) -> str:
        if not value.strip() or CONTROL_CHARACTERS.search(value):
            raise ValueError(
                "an id is one line of text (no newline or other control character), not blank"
            )
        return value

    @field_validator("prompt")
    @classmethod
    def _prompt_is_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("blank: write what the task asks")
        return value

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

    def code_target(self) -> CodeTarget | None:
        """The function this task asks for, from what the agent may know: a feedback-visible
        code check's entry point, else one (of a hidden check or the metadata) that the prompt
        names; a prelude from a visible code check, or a hidden one's whose every line the
        prompt shows. None: not a code task as far as the agent can tell. Nothing else of a
        hidden check is used, so self-tests and carry-over reveal nothing of it."""
        code = [c for c in self.checks if isinstance(c, PythonTestsCheck) and not c.file]
        code.sort(key=lambda c: c.visibility != "feedback")
        names = [(c.entry_point, c.visibility == "feedback") for c in code if c.entry_point]
        if isinstance(self.metadata.get("entry_point"), str):
            names.append((self.metadata["entry_point"], False))
        entry = next((n for n, seen in names if n and (seen or self._names(n))), None)
        if entry is None:
            return None
        shown = (c.prelude for c in code if c.visibility == "feedback" or self._shows(c.prelude))
        return CodeTarget(entry_point=entry, prelude=next((p for p in shown if p), ""))

    def _names(self, name: str) -> bool:
        return re.search(rf"\b{re.escape(name)}\b", self.prompt) is not None

    def _shows(self, text: str) -> bool:
        """Every line of the text is in the prompt, as written or as Python's own `ast.unparse`
        writes the prompt's code blocks (a prelude taken from the prompt is written so)."""
        shown = self.prompt
        for block in re.findall(r"```(?:python)?\n(.*?)```", self.prompt, re.S):
            shown += "\n" + _unparsed(block)
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return all(line in shown for line in lines)


def _unparsed(block: str) -> str:
    """A code block as `ast.unparse` writes it; one ending in the bare signature of the
    function to complete (a code task's prompt) is read with a stub body. "" if not Python."""
    last = block.rstrip().splitlines()[-1] if block.strip() else ""
    stub = " " * (len(last) - len(last.lstrip()) + 4) + "..."
    for code in (block, f"{block.rstrip()}\n{stub}\n"):
        with contextlib.suppress(SyntaxError, ValueError):
            return ast.unparse(ast.parse(code))
    return ""


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


class Evidence(Record):
    """Counterfactual pairs: the same task with the lesson and without it, same settings."""

    pairs: int = Field(default=0, ge=0)
    helped: int = Field(default=0, ge=0)
    """Pairs where the attempt with the lesson passed its visible checks and the one without
    failed them."""
    hurt: int = Field(default=0, ge=0)
    """Pairs where the attempt without the lesson passed and the one with it failed."""
    tasks: list[str] = Field(default_factory=list)
    """The tasks it was tried on, one per pair."""


class CaseRecord(Record):
    """A worked example: what a passing attempt submitted and what the visible checks said
    (the task's prompt is the lesson's `text`). Nothing a hidden check holds."""

    answer: str
    feedback: str = ""


class LessonValidity(Record):
    status: LessonStatus = "candidate"
    retrieved: int = 0
    helped: int = 0
    hurt: int = 0
    reinforced: int = 0
    """Times the reflector wrote this lesson again (its twin was folded into it)."""
    expires_at: float | None = None
    superseded_by: str | None = None
    evidence: Evidence = Field(default_factory=lambda: Evidence())
    """What verification measured (`mulligan memory verify`, a transfer study's learning
    phase); `retrieved`, `helped` and `hurt` above are online counters: how often the lesson
    was shown, and how often the attempt that saw it passed or failed its visible checks."""

    @property
    def confidence(self) -> float:
        """Laplace-smoothed share of uses that passed; being written again counts half a help."""
        support = self.helped + 0.5 * self.reinforced
        return (support + 1) / (support + self.hurt + 2)


class Lesson(Record):
    id: str
    text: str
    kind: Literal["failure", "insight", "diagnosis", "case"] = "failure"
    """`diagnosis`: specific to one attempt, carried within its episode, never stored for
    other tasks; `failure` and `insight` are general lessons; `case`: a worked example (its
    `text` the task's prompt, `case` what passed)."""
    scope: LessonScope = Field(default_factory=LessonScope)
    source: LessonSource = Field(default_factory=LessonSource)
    validity: LessonValidity = Field(default_factory=LessonValidity)
    case: CaseRecord | None = None


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
    def selection(self) -> Selection | None:
        return next((a.selection for a in reversed(self.attempts) if a.selection), None)

    @property
    def submitted(self) -> int:
        """The index of the attempt whose answer the episode submits: a selection's pick, else
        the last attempt (-1: none)."""
        chosen = self.selection
        if chosen is not None:
            trials = [a.trial for a in self.attempts]
            if chosen.picks and chosen.picks[-1] in trials:
                return trials.index(chosen.picks[-1])
        return len(self.attempts) - 1

    @property
    def usage(self) -> Usage:
        """Every model call the episode caused, all roles."""
        return Usage.total(a.usage for a in self.attempts)

    @property
    def usage_by_role(self) -> dict[Role, Usage]:
        return add_by_role(*(a.usage_by_role for a in self.attempts))
