"""Budgets for one attempt, checked before every model call."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields, replace

from mulligan.schema import BudgetOverrides, StopReason, Usage


@dataclass(frozen=True)
class Budget:
    max_steps: int = 12
    max_tokens: int = 60_000
    max_seconds: float = 600.0
    max_cost: float = 1.0
    max_format_errors: int = 3

    def overridden(self, overrides: BudgetOverrides | None) -> Budget:
        if overrides is None:
            return self
        given = {k: v for k, v in overrides.model_dump().items() if v is not None}
        return replace(self, **given)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


@dataclass
class Spend:
    """What an attempt has used so far."""

    budget: Budget
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    format_errors: int = 0
    """Consecutive format errors; reset by a well-formed turn."""
    started: float = field(default_factory=time.monotonic)

    def record(self, usage: Usage) -> None:
        self.calls += 1
        self.usage = self.usage + usage

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def exhausted(self) -> StopReason | None:
        """The budget that forbids another model call, if any."""
        b = self.budget
        if self.format_errors >= b.max_format_errors:
            return "format_errors"
        if self.calls >= b.max_steps:
            return "max_steps"
        if self.usage.total_tokens >= b.max_tokens:
            return "max_tokens"
        if self.elapsed() >= b.max_seconds:
            return "max_seconds"
        if self.usage.cost >= b.max_cost:
            return "max_cost"
        return None

    def last_call(self) -> StopReason | None:
        """The budget that the next call would use up (by the average call so far), if any."""
        b = self.budget
        if self.calls + 1 >= b.max_steps:
            return "max_steps"
        if self.calls == 0:
            return None
        per_call = 1 / self.calls
        if self.usage.total_tokens * (1 + 2 * per_call) >= b.max_tokens:
            return "max_tokens"
        if self.elapsed() * (1 + 2 * per_call) >= b.max_seconds:
            return "max_seconds"
        if self.usage.cost * (1 + 2 * per_call) >= b.max_cost and self.usage.cost > 0:
            return "max_cost"
        return None
