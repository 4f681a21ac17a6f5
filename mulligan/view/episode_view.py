"""An episode shaped for its page: each attempt's timeline, what its checks said (the
visible ones as the agent saw them, the hidden ones marked as never shown), the diff of its
answer against the attempt before, and the lessons in play."""

from __future__ import annotations

import difflib
from typing import Any

from mulligan.memory.assignment import Assignment
from mulligan.report.stats import same_answer
from mulligan.schema import Attempt, Episode, Lesson, Step, Verdict


def diff_lines(before: str, after: str, names: tuple[str, str]) -> list[tuple[str, str]]:
    """A unified diff as (kind, line) with kind add, remove, hunk or same."""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), names[0], names[1], lineterm=""
    )
    return [(_kind(line), line) for line in lines]


def _kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    return {"+": "add", "-": "remove", "@": "hunk"}.get(line[:1], "same")


def patch_lines(patch: str) -> list[tuple[str, str]]:
    """A unified diff as logged (a solve attempt's changes), classified line by line."""
    return [(_kind(line), line) for line in patch.splitlines()]


def calls(step: Step) -> list[dict[str, Any]]:
    """The step's tool calls, each with its result (then any result no call asked for)."""
    results = {r.call_id: r for r in step.results}
    made = [(c.name, c.arguments, c.id, results.pop(c.id, None)) for c in step.tool_calls]
    made += [(orphan.name, "", orphan.call_id, orphan) for orphan in results.values()]
    return [
        {"name": name, "arguments": arguments, "id": call_id,
         "status": result.status if result else "no result",
         "output": result.output if result else "",
         "seconds": f"{result.seconds:.2f}" if result else "-",
         "lines": len(result.output.splitlines()) if result else 0}
        for name, arguments, call_id, result in made
    ]  # fmt: skip


def drawn_text(attempt: Attempt) -> str:
    """How its strategy drew it, where that differs from the run's own way: "temperature 0.6,
    prompt approach_plan"; empty for the others."""
    parts = (
        [] if attempt.drawn_temperature is None else [f"temperature {attempt.drawn_temperature:g}"]
    )
    return ", ".join(parts + ([f"prompt {attempt.approach}"] if attempt.approach else []))


def attempts(
    episode: Episode,
    lessons: dict[str, Lesson],
    assigned: dict[int, Assignment] | None = None,
) -> list[dict[str, Any]]:
    """Each attempt and its verdict, with what its page shows beside them: the diff of its
    answer against the attempt before, the lessons shown, and the candidate verification
    while working assigned to it (`assigned`, by trial: shown, or withheld)."""
    found = []
    for n, attempt in enumerate(episode.attempts):
        diff = None
        if n:
            before = episode.attempts[n - 1]
            names = (f"trial {before.trial}", f"trial {attempt.trial}")
            lines = diff_lines(before.answer or "", attempt.answer or "", names)
            diff = {"repeated": same_answer(before.answer, attempt.answer), "lines": lines}
        ids = attempt.lesson_ids
        found.append(
            {
                "attempt": attempt,
                "verdict": episode.verdicts[n] if n < len(episode.verdicts) else None,
                "drawn": drawn_text(attempt),
                "diff": diff,
                "changes": patch_lines(attempt.changes) if attempt.changes else [],
                "shown": [lessons[i] for i in ids if i in lessons],
                "shown_missing": [i for i in ids if i not in lessons],
                "assigned": (assigned or {}).get(attempt.trial),
            }
        )
    return found


def submitted_trial(episode: Episode) -> int | None:
    """The trial whose answer the episode submitted (None before any attempt)."""
    return episode.attempts[episode.submitted].trial if episode.attempts else None


def selection_view(episode: Episode, submitted: int | None) -> dict[str, Any] | None:
    """How a selection strategy chose (None for an episode that did not select): each
    cluster of candidates with what it passed and its score, in the order the rule ranked
    them (a full visible pass first), the one holding the `submitted` trial marked. Only the
    evidence the selection saw: nothing hidden."""
    chosen = episode.selection
    if chosen is None or submitted is None:
        return None
    rows = []
    for n, trials in enumerate(chosen.clusters):
        given = chosen.given[n] if n < len(chosen.given) else None
        score = f"{chosen.scores[n]:g}" if n < len(chosen.scores) else "-"
        rows.append({"trials": trials, "submitted": submitted in trials, "given": given,
                     "score": score})  # fmt: skip
    return {"rule": chosen.rule, "clusters": rows,
            "crashed": chosen.crashed, "probes": chosen.probes,
            "separation": chosen.separation, "drawn": len(episode.attempts)}  # fmt: skip


def after(verdict: Verdict | None) -> str:
    """What the attempt a lesson's event concerns scored ("-" when none was logged)."""
    if verdict is None:
        return "-"
    seen = verdict.visible_passed
    return ("passed" if verdict.passed else "failed") + (
        "" if seen is None else f" (visible checks {'passed' if seen else 'failed'})"
    )
