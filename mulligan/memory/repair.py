"""A history reloaded after a crash: a tool call without a result is closed, never left open
(an OpenAI-compatible server refuses a call with no answer)."""

from __future__ import annotations

from mulligan.schema import Step, ToolResult


def repair_steps(steps: list[Step]) -> list[Step]:
    """Close every tool call that has no result with an `interrupted` observation."""
    repaired = []
    for step in steps:
        answered = {r.call_id for r in step.results}
        missing = [c for c in step.tool_calls if c.id not in answered]
        if missing:
            step = step.model_copy(deep=True)
            step.results += [
                ToolResult(
                    call_id=c.id,
                    name=c.name,
                    status="interrupted",
                    output="Interrupted: the run stopped before this call returned.",
                )
                for c in missing
            ]
            order = {c.id: n for n, c in enumerate(step.tool_calls)}
            step.results.sort(key=lambda r: order.get(r.call_id, len(order)))
        repaired.append(step)
    return repaired
