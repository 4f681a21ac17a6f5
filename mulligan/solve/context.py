"""What the repair pipeline shows the model: the failing test, its assertion, the check's
output cut to the part that matters, and the implicated functions with line numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mulligan import prompts
from mulligan.solve.copies import Project
from mulligan.solve.localise import (
    Code,
    Failure,
    Function,
    Localisation,
    docstring_body,
    localise,
    numbered,
    read_failure,
    window,
)
from mulligan.solve.preflight import CheckRun
from mulligan.text_cut import head_and_tail

OUTPUT_CHARS = 1200
"""How much of the failing check's output the prompt quotes (the code is shown besides)."""
FUNCTION_LINES = 40
"""A longer function is shown as this many lines around the line the traceback names."""
TEST_LINES = 30
TRACE_LINES = 40
"""Lines of the failing test's trace a candidate is shown at most."""
PYTEST_FAILURES = re.compile(r"^_{3,} .* _{3,}$", re.MULTILINE)
PYTEST_SUMMARY = re.compile(r"^=+ short test summary info =+$", re.MULTILINE)


@dataclass
class Diagnosis:
    """A failing check read: what failed, and where the code to show is."""

    run: CheckRun
    failure: Failure
    localisation: Localisation
    code: Code
    trials: int = 1
    trace: list[tuple[Function, list[str]]] = field(default_factory=list)
    """What the shown functions did on the failing test: each call, in the order called, as
    the prompt shows it (solve/trace.py)."""
    ran: dict[Function, set[int]] = field(default_factory=dict)
    """The lines each function the failing test called ran, where the trace holds them all."""

    def shown_files(self, trial: int) -> dict[str, set[int]]:
        """The files candidate `trial` is shown, and their lines it is shown."""
        shown: dict[str, set[int]] = {}
        for function in self.localisation.group(trial):
            start, end = window(function, self.localisation.lines.get(function), FUNCTION_LINES)
            shown.setdefault(function.path, set()).update(range(start, end + 1))
        return shown

    def line(self) -> str:
        """One line: how it localised and what its candidates are shown (`;`-separated)."""
        groups = self.localisation.shown(self.trials)
        shown = "; ".join(", ".join(map(str, g)) for g in groups if g) or "no function"
        how = {"traceback": "from the traceback", "calls": "by what the failing test calls"}
        functions = {function for function, _ in self.trace}
        traced = f"; the failing test traced: {len(self.trace)} calls of {len(functions)} functions"
        return f"localised {how[self.localisation.how]}: {shown}{traced if self.trace else ''}"

    def trace_shown(self, trial: int) -> str:
        """The calls of the functions candidate `trial` is shown, at most TRACE_LINES lines."""
        group = self.localisation.group(trial)
        lines = [line for function, call in self.trace if function in group for line in call]
        if len(lines) > TRACE_LINES:
            lines = lines[:TRACE_LINES] + [f"  ... ({len(lines) - TRACE_LINES} more lines)"]
        return "\n".join(lines)


def diagnose(before: list[CheckRun], project: Project, trials: int = 1) -> Diagnosis | None:
    """The first failing check's diagnosis; None if every check passed."""
    failing = [r for r in before if not r.run.ok]
    if not failing:
        return None
    files = project.files()
    code = Code(project.directory, files)
    failure = read_failure(failing[0].output, files)
    return Diagnosis(failing[0], failure, localise(failure, code), code, trials)


def relevant_output(output: str, limit: int = OUTPUT_CHARS) -> str:
    """pytest's failure section when there is one (not its collection and progress lines),
    else the whole output; cut to `limit` characters, head and tail kept."""
    start = PYTEST_FAILURES.search(output)
    if start:
        end = PYTEST_SUMMARY.search(output, start.start())
        output = output[start.start() : end.start() if end else len(output)]
    return head_and_tail(output.strip(), limit)


def shown_code(diagnosis: Diagnosis, trial: int) -> list[dict[str, str]]:
    localisation, sources = diagnosis.localisation, diagnosis.code.sources
    shown = []
    for function in localisation.group(trial):
        mark, source = localisation.lines.get(function), sources[function.path]
        start, end = window(function, mark, FUNCTION_LINES)
        code = numbered(source, start, end, mark, docstring_body(source, function))
        shown.append({"path": function.path, "name": function.name, "code": code})
    return shown


def test_code(diagnosis: Diagnosis) -> dict[str, str] | None:
    test: Function | None = diagnosis.localisation.test
    if test is None:
        return None
    frames = [line for path, line in diagnosis.failure.test_frames if path == test.path]
    mark = next((line for line in reversed(frames) if test.holds(line)), None)
    start, end = window(test, mark, TEST_LINES)
    source = diagnosis.code.sources[test.path]
    return {"name": test.name, "path": test.path, "code": numbered(source, start, end, mark)}


def repair_prompt(
    diagnosis: Diagnosis,
    trial: int,
    task: str,
    project: str,
    lessons: list[str],
    earlier: list[str],
) -> str:
    functions = shown_code(diagnosis, trial)
    return prompts.render(
        "repair",
        task=task,
        project=project,
        command=diagnosis.run.check.command,
        test=test_code(diagnosis),
        assertion=diagnosis.failure.assertion,
        output=relevant_output(diagnosis.run.output),
        how=diagnosis.localisation.how,
        functions=functions,
        lessons=lessons,
        earlier=earlier,
        trace=diagnosis.trace_shown(trial),
        example_path=functions[0]["path"] if functions else "path/to/module.py",
    )
