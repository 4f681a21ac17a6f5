"""What an attempt has spent against its budget (`BudgetSection`, a section of the run
configuration), checked before every model call."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from mulligan.schema import Role, Step, StopReason, Usage, add_by_role
from mulligan.settings.run_config import BudgetSection


@dataclass
class Spend:
    """What an attempt has used so far."""

    budget: BudgetSection
    calls: int = 0
    usage_by_role: dict[Role, Usage] = field(default_factory=dict)
    format_errors: int = 0
    """Consecutive format errors; reset by a well-formed turn."""
    repeats: int = 0
    """Consecutive steps whose every call was a repeat; reset by a step with a fresh call."""
    started: float = field(default_factory=time.monotonic)
    _usage: Usage | None = field(default=None, repr=False)
    """`usage` as last added up; None after a call is recorded."""

    @property
    def usage(self) -> Usage:
        """Every call of the attempt so far: the actor's turns and the summariser's folds."""
        if self._usage is None:
            self._usage = Usage.total(self.usage_by_role.values())
        return self._usage

    def record(self, usage: Usage, role: Role = "actor") -> None:
        """A model call; only the actor's turns count as steps."""
        if role == "actor":
            self.calls += 1
        self.usage_by_role = add_by_role(self.usage_by_role, {role: usage})
        self._usage = None

    def resume(self, steps: list[Step]) -> None:
        """Count what the logged steps of an interrupted attempt already spent."""
        for step in steps:
            self.record(step.usage)
            if step.fold_usage != Usage():
                self.record(step.fold_usage, "summariser")
            self.started -= step.latency_s + sum(r.seconds for r in step.results)
            self.format_errors = self.format_errors + 1 if step.kind == "format_error" else 0
            self.count_repeats(step)

    def count_repeats(self, step: Step) -> None:
        only = bool(step.results) and all(r.status == "repeated" for r in step.results)
        self.repeats = self.repeats + 1 if only else 0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def seconds_left(self) -> float:
        return self.budget.max_seconds - self.elapsed()

    def exhausted(self) -> StopReason | None:
        """The budget that forbids another model call, if any."""
        b, cost = self.budget, self.usage.cost
        over: dict[StopReason, bool] = {
            "format_errors": self.format_errors >= b.max_format_errors,
            "max_steps": self.calls >= b.max_steps,
            "max_tokens": self.usage.total_tokens >= b.max_tokens,
            "max_seconds": self.elapsed() >= b.max_seconds,
            "max_cost": cost is not None and cost >= b.max_cost,
        }
        return next((reason for reason, spent in over.items() if spent), None)

    def last_call(self) -> StopReason | None:
        """The budget that the next call would use up (by the average call so far), if any."""
        b = self.budget
        if self.calls + 1 >= b.max_steps:
            return "max_steps"
        if self.repeats >= b.max_repeats:
            return "repeats"
        if self.calls == 0:
            return None
        per_call = 1 / self.calls
        if self.usage.total_tokens * (1 + 2 * per_call) >= b.max_tokens:
            return "max_tokens"
        if self.elapsed() * (1 + 2 * per_call) >= b.max_seconds:
            return "max_seconds"
        cost = self.usage.cost
        if cost is not None and cost > 0 and cost * (1 + 2 * per_call) >= b.max_cost:
            return "max_cost"
        return None
