"""Plain-text views of records for people (the CLI prints them)."""

from __future__ import annotations

from mulligan.schema import Attempt, Episode, Usage, Verdict, add_by_role


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines()) if text else prefix


def trajectory(attempt: Attempt, max_result_chars: int = 600) -> str:
    lines = [f"== {attempt.task_id} · trial {attempt.trial} · {attempt.model} ({attempt.protocol})"]
    if attempt.lesson_ids:
        lines.append(f"lessons given: {', '.join(attempt.lesson_ids)}")
    folds = {event.before_step: event for event in attempt.compressions}
    for step in attempt.steps:
        if step.index in folds:
            event = folds[step.index]
            lines.append(
                f"-- folded steps {event.folded_steps} into the summary ({event.method}): "
                f"{event.tokens_before} -> {event.tokens_after} tokens"
            )
            lines.append(_indent(event.summary))
        lines.append(
            f"[{step.index}] {step.kind} ({step.usage.total_tokens} tokens, {step.latency_s:.2f}s)"
        )
        if step.text.strip():
            lines.append(_indent(step.text.strip()))
        if step.discarded.strip():
            lines.append(
                f"    [... {len(step.discarded.strip())} characters after the action, not run]"
            )
        lines += [f"  -> {call.name}({call.arguments})  [{call.id}]" for call in step.tool_calls]
        for result in step.results:
            output = result.output
            if len(output) > max_result_chars:
                output = (
                    output[:max_result_chars]
                    + f" [... {len(result.output) - max_result_chars} more]"
                )
            lines.append(f"  <- {result.status}: " + _indent(output, "     ").lstrip())
        if step.feedback:
            lines.append("  !! " + step.feedback.splitlines()[0])
    usage = attempt.usage
    lines.append(
        f"stop: {attempt.stop_reason}{' (forced final call)' if attempt.final_forced else ''} · "
        f"{len(attempt.steps)} steps · {usage.prompt_tokens}+{usage.completion_tokens} tokens · "
        f"{usage.cost_text()} · {attempt.seconds:.1f}s{usage.unmetered_text()}"
    )
    if attempt.error:
        lines.append(f"error: {attempt.error}")
    lines.append(f"answer: {attempt.answer if attempt.answer is not None else '(none)'}")
    return "\n".join(lines)


def verdict_line(task_id: str, verdict: Verdict) -> str:
    mark = "PASS" if verdict.passed else "FAIL"
    failed = [c.name or c.type for c in verdict.checks if not c.passed]
    tail = f"  failed: {', '.join(failed)}" if failed else ""
    return f"{mark} {task_id}  score {verdict.score:.2f}{tail}"


def run_summary(episodes: list[Episode]) -> str:
    attempts = [a for e in episodes for a in e.attempts]
    passed = sum(e.passed for e in episodes)
    n = max(len(episodes), 1)
    steps = sum(len(a.steps) for a in attempts) / max(len(attempts), 1)
    usage = Usage.total(e.usage for e in episodes)
    by_role = add_by_role(*(e.usage_by_role for e in episodes))
    split = ", ".join(f"{role} {u.total_tokens}" for role, u in by_role.items())
    return (
        f"passed {passed}/{len(episodes)} ({100 * passed / n:.0f}%) · "
        f"{len(attempts)} attempts · {steps:.1f} steps per attempt · "
        f"{usage.prompt_tokens}+{usage.completion_tokens} tokens ({split}) · {usage.cost_text()}"
        f"{usage.unmetered_text()}"
    )
