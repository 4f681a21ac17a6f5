"""What the implicated code did on the failing test, line by line: the repair prompt shows it
beside the code, as a debugger would (LDB, "Debug like a Human", 2024: intermediate values
let a model find the line that goes wrong).

When the failing check runs pytest, the failing test is run once more, alone, in a fresh copy
of the project, in the box, with a pytest plugin (`mulligan_trace_plugin.py`, copied into that
copy and loaded through PYTEST_PLUGINS) that traces the functions the repair pipeline shows:
the arguments each call got, each line that ran with the variables it changed, and what it
returned or raised. Nothing is traced for
a check that is not pytest, or when the run records nothing; the prompt then goes without.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
from pathlib import Path
from typing import Any

from mulligan import sandbox
from mulligan.schema import Task
from mulligan.solve.context import Diagnosis
from mulligan.solve.copies import ProjectCopies, run_check
from mulligan.solve.localise import Function

log = logging.getLogger("mulligan")
PLUGIN = Path(__file__).with_name("mulligan_trace_plugin.py")
RECORD = ".mulligan-trace.json"
EVENTS = 60
"""Events recorded at most (calls, lines that changed something, returns)."""
SHOWN_LINES = 40
"""Lines of the trace the prompt shows at most."""
ARROW = "    -> "
"""Between a line that ran and the values it made: `   6 | total = a + b    -> total = 7`."""
COPIED_VALUES = re.compile(re.escape(ARROW) + r"\w+ = .*$")
"""A trace line's values, copied back with the line into an edit."""


def pytest_test_name(diagnosis: Diagnosis) -> str | None:
    """The failing test's pytest name (`test_x[1]`), '' when pytest names none; None when the
    check is not pytest."""
    if "pytest" not in diagnosis.run.check.command:
        return None
    tests = diagnosis.failure.tests
    return tests[0].rsplit("::", 1)[-1] if tests else ""


def traced_command(command: str, workspace: Path, spec: dict[str, Any]) -> str:
    """The check's command with the plugin loaded (pytest reads PYTEST_PLUGINS; the plugin
    sits in the workspace, which is on the path even when the command sets PYTHONPATH=.)
    and told what to trace."""
    values = {
        "MULLIGAN_TRACE": shlex.quote(json.dumps(spec)),
        "PYTEST_PLUGINS": PLUGIN.stem,
        "PYTHONPATH": f'{shlex.quote(str(workspace))}"${{PYTHONPATH:+:$PYTHONPATH}}"',
    }
    return "export " + " ".join(f"{k}={v}" for k, v in values.items()) + "; " + command


def record_trace(
    diagnosis: Diagnosis, copies: ProjectCopies, task: Task, policy: sandbox.Policy
) -> dict[str, Any] | None:
    """The plugin's record of the failing test in a fresh copy; None when there is none."""
    name = pytest_test_name(diagnosis)
    functions = diagnosis.localisation.functions[:4]
    if name is None or not functions:
        return None
    with copies(task) as workspace:
        (workspace / PLUGIN.name).write_text(PLUGIN.read_text(encoding="utf-8"), "utf-8")
        out = workspace / RECORD
        spec = {
            "test": name,
            "targets": [[f.path, f.start, f.end] for f in functions],
            "out": str(out),
            "events": EVENTS,
        }
        check = diagnosis.run.check
        command = traced_command(check.command, workspace, spec)
        check = check.model_copy(update={"command": command})
        run = run_check(check, workspace, task.network, policy)
        if not out.is_file():
            log.info("trace: nothing recorded (exit %s)", run.exit_code)
            return None
        try:
            found: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
    return found if found.get("calls") else None


def shown_trace(record: dict[str, Any], diagnosis: Diagnosis) -> str:
    """The record as the prompt shows it: per call, its arguments, then each line that ran
    (with its source) and what it changed, then what it returned."""
    sources = diagnosis.code.sources
    out: list[str] = []
    for call in record.get("calls", []):
        function = _function_of(call, diagnosis.localisation.functions)
        if function is None:
            continue
        lines = sources.get(function.path, "").splitlines()
        for kind, number, values in call["events"]:
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
    if len(out) > SHOWN_LINES:
        out = out[:SHOWN_LINES] + [f"  ... ({len(out) - SHOWN_LINES} more lines not shown)"]
    return "\n".join(out)


def _function_of(call: dict[str, Any], functions: list[Function]) -> Function | None:
    path = str(call.get("path", ""))
    for function in functions:
        if (path == function.path or path.endswith("/" + function.path)) and function.holds(
            int(call.get("first_line", 0))
        ):
            return function
    return None


def traced(
    diagnosis: Diagnosis, copies: ProjectCopies, task: Task, policy: sandbox.Policy
) -> Diagnosis:
    """The diagnosis with the failing test's trace (unchanged when none could be taken)."""
    record = record_trace(diagnosis, copies, task, policy)
    if record:
        diagnosis.trace = shown_trace(record, diagnosis)
    return diagnosis
