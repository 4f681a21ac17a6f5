"""Separating two finalists (S*, Li et al. 2025): the model writes one input on which the two
programs differ and the value the task implies for it; both run on it in the box, and the one
that returns that value wins. Neither or both: nothing is decided here."""

from __future__ import annotations

import json

from mulligan import prompts, sandbox
from mulligan.evaluator.code import last_code_block
from mulligan.evaluator.probe import ask_json, outputs, returned
from mulligan.llm.base import ChatModel
from mulligan.schema import CodeTarget, Task, Usage


def separate(
    model: ChatModel,
    task: Task,
    target: CodeTarget,
    finalists: tuple[tuple[int, str], tuple[int, str]],
    policy: sandbox.Policy | None = None,
) -> tuple[int | None, str, Usage]:
    """(the winning trial or None, what happened, the call's usage); `finalists`: two
    (trial, answer) pairs, the better-ranked first."""
    (first, first_answer), (second, second_answer) = finalists
    text = prompts.render(
        "separate",
        task=task.prompt,
        entry_point=target.entry_point,
        first=last_code_block(first_answer).strip("\n"),
        second=last_code_block(second_answer).strip("\n"),
    )
    found, usage = ask_json(model, text)
    args, implied = (found or {}).get("input"), (found or {}).get("output")
    if found is None or not isinstance(args, list) or "output" not in found:
        return None, "no input written: the finalists stay as ranked", usage
    shown = json.dumps(args)[:200]
    got = [outputs(answer, target, [args], policy)[0] for answer in (first_answer, second_answer)]
    if got[0] == got[1]:
        return None, f"on {shown} both returned the same: the finalists stay as ranked", usage
    matched = [trial for trial, out in zip((first, second), got, strict=True) if _is(out, implied)]
    if len(matched) != 1:
        return None, f"on {shown} neither returned the implied value: as ranked", usage
    return matched[0], f"on {shown} only trial {matched[0]} returned the implied value", usage


def _is(output: str, implied: object) -> bool:
    try:
        return bool(returned(output) == implied)
    except ValueError:
        return False
