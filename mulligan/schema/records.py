"""The records of one attempt: its usage, steps and tool calls, and the base of every record."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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

    def __sub__(self, other: Usage) -> Usage:
        """What is left when `other`, a part of this usage, is taken out of it."""
        return self + Usage(
            prompt_tokens=-other.prompt_tokens,
            completion_tokens=-other.completion_tokens,
            cost=None if other.cost is None else -other.cost,
            unmetered_calls=-other.unmetered_calls,
        )

    def unmetered_text(self) -> str:
        """ " · N calls unmetered" when some call's usage was never reported, else nothing."""
        n = self.unmetered_calls
        return f" · {n} call{'s' if n != 1 else ''} unmetered (timed out)" if n else ""

    @staticmethod
    def total(usages: Iterable[Usage]) -> Usage:
        return sum(usages, Usage())

    def cost_text(self) -> str:
        """Dollars where a price made them; "not priced" for a model nobody priced (unknown)
        or one priced at 0 (the local model: its cost is its tokens and time)."""
        return f"${self.cost:.4f}" if self.cost else "not priced"

    def as_json(self) -> dict[str, Any]:
        return self.model_dump() | {"total_tokens": self.total_tokens}


Role = Literal["actor", "summariser", "reflector", "judge", "tester", "selector"]
"""Who made a model call: the actor, context compression, reflections and insights,
llm_judge checks, self-tests, a selection's probe inputs and finalists' separation."""


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
    discarded: str = ""
    """What a text-protocol reply went on to write after its first action (outputs it imagined,
    more actions): never run, and not shown to the model again. `text + discarded` is the reply."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    results: list[ToolResult] = Field(default_factory=list)
    kind: Literal["act", "final", "format_error", "summary"] = "act"
    forced: bool = False
    """The turn was the last call the budget allowed, made without tools: a final answer in
    it was forced (kept here so that a resumed attempt knows it)."""
    feedback: str = ""
    """What the actor told the model after this turn besides tool results (format reminders)."""
    usage: Usage = Field(default_factory=Usage)
    fold_usage: Usage = Field(default_factory=Usage)
    """What folding older steps into the running summary cost just before this turn."""
    latency_s: float = 0.0
    finish_reason: str = ""
    seed: int | None = None
    """The sampling seed its request was sent with (None: the endpoint takes none)."""
    fingerprint: str | None = None
    """The endpoint's `system_fingerprint` on the reply, where it sends one."""

    def closed(self) -> Step:
        """The step with every call that has no result (a crash cut it short) closed by an
        `interrupted` one: a server refuses a call with no answer, and a resumed attempt may
        make the call again."""
        answered = {r.call_id for r in self.results}
        missing = [c for c in self.tool_calls if c.id not in answered]
        if not missing:
            return self
        step = self.model_copy(deep=True)
        note = "Interrupted: the run stopped before this call returned."
        step.results += [
            ToolResult(call_id=c.id, name=c.name, status="interrupted", output=note)
            for c in missing
        ]
        order = {c.id: n for n, c in enumerate(step.tool_calls)}
        step.results.sort(key=lambda r: order.get(r.call_id, len(order)))
        return step

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
    "repeats",
    "model_error",
]


class Selection(Record):
    """How a selection strategy chose among its candidates, kept on its last candidate."""

    picks: list[int]
    """For budgets of 1, 2, ... of the candidates drawn: the trial submitted among the first
    k (the separation of finalists, when set, decides the last only). Drawing stops at a
    candidate passing every visible check or once the pick is decided, so a budget past the
    last entry submits the last entry's trial."""
    rule: str
    """What decided the last pick: dual agreement, output agreement, majority, separation, or
    first (nothing told the candidates apart)."""
    clusters: list[list[int]] = Field(default_factory=list)
    """The candidates' trials grouped by behaviour, the best cluster first."""
    scores: list[float] = Field(default_factory=list)
    """Each cluster's dual agreement score, in the same order."""
    given: list[int] = Field(default_factory=list)
    """Each cluster's count of the task's own feedback-visible checks passed (self-tests left
    out), in the same order: clusters rank by it first, then by score."""
    crashed: list[int] = Field(default_factory=list)
    """Trials that ran on no input at all: never submitted while another one runs."""
    probes: int = 0
    """Inputs the model wrote to compare the candidates' outputs on."""
    separation: str = ""
    """What separating the two finalists did ("": not tried)."""


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
    selection: Selection | None = None
    """On a selection strategy's last candidate: which one the episode submits, and why."""
    drawn_temperature: float | None = None
    """The temperature its strategy drew it at (None: the run's, the endpoint's setting)."""
    approach: str | None = None
    """The prompt variant its strategy drew it with (a prompt file's name; None: none)."""

    def shared(self) -> Attempt:
        """A copy for a strategy that shares this trial 1 (a paired study): what making and
        judging it cost, without the reflection the strategy that made it wrote after it."""
        copy = self.model_copy(deep=True)
        after = copy.usage_by_role.pop("reflector", None)
        if after is not None:
            copy.usage = copy.usage - after
        return copy

    def provenance(self) -> dict[str, list[Any]]:
        """The seeds its model calls were sent with and the fingerprints their replies bore."""
        fingerprints = {s.fingerprint for s in self.steps if s.fingerprint}
        return {
            "seeds": [s.seed for s in self.steps if s.seed is not None],
            "fingerprints": sorted(fingerprints),
        }

    def charge(self, role: Role, usage: Usage) -> None:
        """Count a call made for this attempt (after it: judging it, reflecting on it)."""
        self.usage_by_role = add_by_role(self.usage_by_role, {role: usage})
        self.usage = self.usage + usage
