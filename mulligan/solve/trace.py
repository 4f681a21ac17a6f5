"""What the implicated code did on the failing test, line by line: the repair prompt shows it
beside the code, as a debugger would (LDB, "Debug like a Human", 2024: intermediate values
let a model find the line that goes wrong).

When the failing check runs pytest, the failing test is run once more, alone, in a fresh copy
of the project, in the box, with a pytest plugin (`mulligan_trace_plugin.py`, copied into that
copy and loaded through PYTEST_PLUGINS) that traces the functions the repair pipeline shows:
the arguments each call got, each line that ran with the variables it changed, and what it
returned or raised. Nothing is traced for a check that is not pytest, or when the run records
nothing; the prompt then goes without.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

from mulligan import sandbox
from mulligan.evaluator.checks import run_command
from mulligan.schema import Task
from mulligan.solve.context import Diagnosis
from mulligan.solve.copies import ProjectCopies
from mulligan.solve.localise import Function

log = logging.getLogger("mulligan")
PLUGIN = Path(__file__).with_name("mulligan_trace_plugin.py")
RECORD = ".mulligan-trace.json"
EVENTS = 40
"""Events recorded at most per function (its calls, the lines that ran, its returns)."""
ARROW = "    -> "
"""Between a line that ran and the values it made: `   6 | total = a + b    -> total = 7`."""
COPIED_VALUES = re.compile(re.escape(ARROW) + r"\w+ = .*$")
"""A trace line's values, copied back with the line into an edit."""


def record_trace(
    diagnosis: Diagnosis, copies: ProjectCopies, task: Task, policy: sandbox.Policy
) -> dict[str, Any] | None:
    """The plugin's record of the failing test in a fresh copy; None when there is none (the
    check is not pytest). Every function ranked is traced: a candidate is shown the calls of
    the ones it is shown; the others may be ranked up by what they returned."""
    functions = diagnosis.localisation.functions
    if "pytest" not in diagnosis.run.check.command or not functions:
        return None
    tests = diagnosis.failure.tests  # pytest's name for it (`test_x[1]`); '': the first failing
    name = tests[0].rsplit("::", 1)[-1] if tests else ""
    with copies(task) as workspace:
        (workspace / PLUGIN.name).write_text(PLUGIN.read_text(encoding="utf-8"), "utf-8")
        out = workspace / RECORD
        targets = [[f.path, f.start, f.end] for f in functions]
        spec = {"test": name, "targets": targets, "out": str(out), "events": EVENTS}
        # the check's command with the plugin loaded (pytest reads PYTEST_PLUGINS; the plugin
        # sits in the workspace, which is on the path even when the command sets PYTHONPATH=.)
        # and told what to trace
        values = {
            "MULLIGAN_TRACE": shlex.quote(json.dumps(spec)),
            "PYTEST_PLUGINS": PLUGIN.stem,
            "PYTHONPATH": f'{shlex.quote(str(workspace))}"${{PYTHONPATH:+:$PYTHONPATH}}"',
        }
        command = "export " + " ".join(f"{k}={v}" for k, v in values.items()) + "; "
        check = diagnosis.run.check
        check = check.model_copy(update={"command": command + check.command})
        run = run_command(check, workspace, task.network, policy)
        if not out.is_file():
            log.info("trace: nothing recorded (exit %s)", run.exit_code)
            return None
        try:
            found = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
    return found if isinstance(found, dict) and found.get("calls") else None


Call = tuple[Function, list[tuple[str, int, dict[str, str]]]]
"""A recorded call: its function and its events (kind, line, values), as far as well formed."""


def rendered_calls(calls: list[Call], diagnosis: Diagnosis) -> list[tuple[Function, list[str]]]:
    """Each recorded call as the prompt shows it: its arguments, then each line that ran
    (with its source) and what it changed, then what it returned; in the order called."""
    rendered = []
    for function, events in calls:
        lines = diagnosis.code.sources.get(function.path, "").splitlines()
        out = []
        for kind, number, values in events:
            said = ", ".join(f"{k} = {v}" for k, v in values.items())
            if kind == "call":
                out.append(f"{function.path}, `{function.name}` called with {said or '()'}:")
            elif kind == "line":
                code = lines[number - 1].strip() if 0 < number <= len(lines) else ""
                out.append(f"  {number:>4} | {code}" + (f"{ARROW}{said}" if said else ""))
            elif kind == "return":
                out.append(f"  returned {values.get('return', '')}")
            elif kind == "exception":
                out.append(f"  line {number} raised {values.get('raise', '')}")
        rendered.append((function, out))
    return rendered


def recorded_calls(record: dict[str, Any], diagnosis: Diagnosis) -> list[Call]:
    """Each recorded call: its function and its events, as far as they are well formed."""
    functions = diagnosis.localisation.functions
    calls = []
    for call in record.get("calls") or []:
        index = call.get("target") if isinstance(call, dict) else None
        if isinstance(index, int) and 0 <= index < len(functions):
            calls.append((functions[index], _well_formed(call.get("events"))))
    return calls


def lines_ran(calls: list[Call]) -> dict[Function, set[int]]:
    """The lines each called function ran, for those whose events were not cut at EVENTS and
    all lie in the function (the traced run is the project's code: a forged record that
    puts lines elsewhere proves nothing)."""
    events: dict[Function, int] = {}
    lines: dict[Function, set[int]] = {}
    for function, said in calls:
        events[function] = events.get(function, 0) + len(said)
        lines.setdefault(function, set()).update(number for _, number, _ in said)
    return {
        f: ran for f, ran in lines.items() if events[f] < EVENTS and all(f.holds(n) for n in ran)
    }


def _well_formed(events: object) -> list[tuple[str, int, dict[str, str]]]:
    """The events of a record made by the project's own code run: those of the plugin's
    shape only (a test could overwrite the record with anything)."""
    return [
        (event[0], event[1], {str(k): str(v) for k, v in event[2].items()})
        for event in (events if isinstance(events, list) else [])
        if isinstance(event, list) and len(event) == 3 and isinstance(event[0], str)
        if isinstance(event[1], int) and isinstance(event[2], dict)
    ]


def traced(
    diagnosis: Diagnosis, copies: ProjectCopies, task: Task, policy: sandbox.Policy
) -> Diagnosis:
    """The diagnosis with the failing test's trace (unchanged when none could be taken)."""
    record = record_trace(diagnosis, copies, task, policy)
    if record:
        calls = recorded_calls(record, diagnosis)
        diagnosis.trace = rendered_calls(calls, diagnosis)
        diagnosis.ran = lines_ran(calls)
        if diagnosis.localisation.how == "calls":
            ranked = ranked_by_returns(diagnosis.localisation.functions, calls, diagnosis)
            diagnosis.localisation = replace(diagnosis.localisation, functions=ranked)
    return diagnosis


def ranked_by_returns(
    functions: list[Function], calls: list[Call], diagnosis: Diagnosis
) -> list[Function]:
    """The functions that returned part of one side of the failing `assert A == B` and not
    of the other go first, the smallest such value first (the nearest to where the result
    went wrong), then the rest in their order; unchanged for another assertion."""
    sides = assertion_sides(diagnosis.failure.assertion)
    if sides is None:
        return functions
    smallest: dict[Function, int] = {}
    for function, events in calls:
        for kind, _, values in events:
            value = values.get("return") if kind == "return" else None
            if value is not None and one_side_holds(value, sides):
                smallest[function] = min(smallest.get(function, len(value)), len(value))
    first = sorted(smallest, key=lambda f: (smallest[f], functions.index(f)))
    return first + [f for f in functions if f not in smallest]


def assertion_sides(assertion: str) -> tuple[str, str] | None:
    """The two sides pytest printed for a failing `assert A == B`; None for another."""
    for line in assertion.splitlines():
        said = line.split("assert ", 1)[1] if "assert " in line else ""
        if " == " in said:
            left, right = said.split(" == ", 1)
            return left, right
    return None


def one_side_holds(value: str, sides: tuple[str, str]) -> bool:
    """Whether a returned value (its repr, maybe cut) is in one side and not the other: a
    string's text of two characters or more anywhere, a shorter one or another value as a
    whole token."""
    value = value.removesuffix("…")
    if value[:1] in "'\"" and len(value) >= 2:
        value = value[1:-1] if value[-1:] == value[:1] else value[1:]
        if len(value) >= 2:
            return (value in sides[0]) != (value in sides[1])
    if not value.strip() or value in ("None", "True", "False"):
        return False
    token = re.compile(r"(?<![\w.])" + re.escape(value) + r"(?![\w.])")
    return bool(token.search(sides[0])) != bool(token.search(sides[1]))
