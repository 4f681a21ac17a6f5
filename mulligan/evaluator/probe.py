"""What candidate programs do on inputs the model wrote from the prompt alone: one model call
per task returns call inputs as JSON; every candidate runs on them in the box.

The values come back through the test harness (evaluator/harness.py), so a candidate cannot
forge them: each probe is an `assert f(*args) == <a fresh object>` that always fails, and the
harness reports what `f` returned (`got ...`, its repr) or which exception it raised.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from mulligan import prompts, sandbox
from mulligan.errors import ModelError
from mulligan.evaluator.code import harness_report, keep_definitions, last_code_block
from mulligan.jsontext import UNREADABLE_JSON, first_json_object
from mulligan.llm.base import ChatModel, Metered
from mulligan.schema import CodeTarget, Task, Usage

MAX_INPUTS = 6
MAX_TOKENS = 512
RUN_SECONDS = 10.0
ONE_SECONDS = 3.0
CRASH = "!crash"
"""A probe that told nothing: the candidate did not load, died, timed out or has no code."""
_LINE = re.compile(r"^(FAILED|ERROR): test (\d+) \(line \d+\)(?: -- (.*))?$", re.S)

Inputs = list[list[Any]]


def ask(model: ChatModel, text: str) -> tuple[str | None, Usage]:
    """One call's reply text, and what it cost; None when the endpoint failed."""
    metered = Metered(model)
    try:
        reply = metered.chat([{"role": "user", "content": text}], max_tokens=MAX_TOKENS)
    except ModelError:
        return None, metered.usage
    return reply.text or "", metered.usage


def ask_json(model: ChatModel, text: str) -> tuple[dict[str, Any] | None, Usage]:
    """One call for one JSON object; None when the endpoint failed or the reply holds none."""
    reply, usage = ask(model, text)
    return first_json_object(reply) if reply is not None else None, usage


def write_inputs(model: ChatModel, task: Task, target: CodeTarget) -> tuple[Inputs, Usage]:
    """Up to MAX_INPUTS distinct argument lists for the function, from the prompt alone."""
    text = prompts.render(
        "probe_inputs", task=task.prompt, entry_point=target.entry_point, count=MAX_INPUTS
    )
    found, usage = ask_json(model, text)
    raw = found.get("inputs") if found else None
    inputs: Inputs = []
    for args in raw if isinstance(raw, list) else []:
        args = args if isinstance(args, list) else [args]
        if args not in inputs and len(json.dumps(args)) <= 2000:
            inputs.append(args)
    return inputs[:MAX_INPUTS], usage


def outputs(
    answer: str, target: CodeTarget, inputs: Inputs, policy: sandbox.Policy | None = None
) -> list[str]:
    """What the candidate in `answer` does on each input: `=repr` of what it returned,
    `!ExceptionName` when it raised, CRASH when the run told nothing. All inputs run at once;
    when that run says nothing (one input loops forever), each runs alone."""
    if not inputs:
        return []
    code = last_code_block(answer) if answer.strip() else ""
    if not code.strip():
        return [CRASH] * len(inputs)
    found = _run(code, target, inputs, RUN_SECONDS, policy)
    if found is None and len(inputs) > 1:
        return [(_run(code, target, [one], ONE_SECONDS, policy) or [CRASH])[0] for one in inputs]
    return found or [CRASH] * len(inputs)


def _run(
    code: str, target: CodeTarget, inputs: Inputs, seconds: float, policy: sandbox.Policy | None
) -> list[str] | None:
    # JSON values written as Python literals (true -> True): JSON gives None, bools, numbers,
    # strings, lists and dicts, whose repr is Python
    tests = "\n".join(f"assert {target.entry_point}(*{args!r}) == object()" for args in inputs)
    run = sandbox.run_tests(
        keep_definitions(code), tests, target.entry_point, target.prelude,
        sandbox.Limits(timeout=seconds), reveal=False, policy=policy,
    )  # fmt: skip
    report = harness_report(run.report or "")
    if report is None:
        return None
    found = [CRASH] * len(inputs)
    for failure in report["failures"]:
        match = _LINE.match(failure)
        if not match or not 1 <= int(match.group(2)) <= len(inputs):
            continue
        said = match.group(3) or ""
        at = int(match.group(2)) - 1
        if match.group(1) == "FAILED" and said.startswith("got "):
            found[at] = "=" + said[4:]
        elif match.group(1) == "ERROR" and re.fullmatch(r"[A-Za-z_]\w*", said):
            found[at] = "!" + said  # a built-in exception, by name
        elif match.group(1) == "ERROR" and said.startswith("the candidate raised"):
            found[at] = "!other"  # an exception class of its own
    return found


def returned(output: str) -> Any:
    """The value an output says was returned, as JSON would give it (tuples as lists);
    raises ValueError when it returned none or is not plain data."""
    if not output.startswith("="):
        raise ValueError("no value returned")
    try:
        return _as_json(ast.literal_eval(output[1:]))
    except (SyntaxError, *UNREADABLE_JSON) as exc:
        raise ValueError(str(exc)) from exc


def _as_json(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _as_json(v) for k, v in value.items()}
    return value
