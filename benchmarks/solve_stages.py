"""Where solve_real's runs stop, bug by bug: was the bug's function among those the repair
pipeline showed (localised), did an edit apply to a copy (edited), did the tests pass."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from real_projects import Bug, checks_as_run

from mulligan.sandbox import Policy
from mulligan.schema import CommandCheck, Episode, Task
from mulligan.solve.context import diagnose
from mulligan.solve.copies import Project, ProjectCopies
from mulligan.solve.diffs import Snapshot, unified_diff
from mulligan.solve.localise import functions_of, innermost
from mulligan.solve.preflight import preflight

SHOWN = re.compile(r"^strategy: .*?; localised [^:]*: (?P<shown>.*)$", re.MULTILINE)


def bug_function(bug: Bug, planted: Path) -> str:
    """`path:function` holding the planted line ('' when it is at a module's top level)."""
    text = (planted / bug.path).read_text()
    line = text[: text.index(bug.replace)].count("\n") + 1
    found = innermost(functions_of(bug.path, text), line)
    return f"{bug.path}:{found.name}" if found else ""


def shown_in(err: str) -> list[list[str]] | None:
    """The groups of functions the pipeline said its candidates are shown, best first (None:
    it did not run, e.g. the agent loop)."""
    found = SHOWN.search(err)
    if not found:
        return None
    said = found["shown"].strip()
    return [] if said == "no function" else [g.split(", ") for g in said.split("; ")]


def localised(function: str, shown: list[list[str]] | None) -> str:
    """Where the bug's `function` is among those shown: `hit` (the first group), `hit-later`
    (a later group, shown to other candidates), `miss`, or '' when nothing was localised (the
    agent loop ran)."""
    if shown is None:
        return ""
    if shown and function in shown[0]:
        return "hit"
    return "hit-later" if any(function in g for g in shown) else "miss"


def edited(episodes: list[Episode]) -> bool:
    return any(a.changes for e in episodes for a in e.attempts)


def stage(passed: bool, where: str, edit: bool) -> str:
    """The first stage that failed, or `fixed`."""
    if passed:
        return "fixed"
    if where == "miss":
        return "not localised"
    return "tests failed" if edit else "no edit applied"


def localise_only(bug: Bug, planted: Path, check: str, trials: int) -> list[list[str]]:
    """What the pipeline would show this bug's candidates: the check run once, as solve's
    preflight does."""
    task = Task(id="localise", prompt="localise", checks=[CommandCheck(command=check, timeout=300)])
    project = Project(planted)
    diagnosis = diagnose(preflight(ProjectCopies(project), task, Policy()), project, trials)
    if diagnosis is None:
        return []
    return [[str(f) for f in group] for group in diagnosis.localisation.shown(trials)]


def applied_exactly(directory: Path, untouched: Snapshot, patch: Path, check: str) -> str:
    """After `solve --apply`: `exactly` when the project differs from how it was by the diff
    solve printed and its check passes there (in the box); else what is wrong."""
    now = Project(directory).snapshot()
    if unified_diff(untouched, now) != patch.read_text():
        return "no: the project's change is not the printed diff"
    passes, broken = checks_as_run(directory, check)
    return "exactly" if passes and not broken else f"no: the check fails ({broken or 'exit'})"


def stage_table(outcomes: list[Any]) -> str:
    """One row per (strategy, bug), then the localisation hit rate per strategy."""
    rows = [
        "| strategy | bug | localised | edit applied | tests passed | stage | --apply wrote |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        shown = o.localised or "—"
        rows.append(
            f"| {o.strategy} | {o.bug} | {shown} | {'yes' if o.edited else 'no'} | "
            f"{'yes' if o.passed else 'no'} | {o.stage} | {o.applied or '—'} |"
        )
    for strategy in dict.fromkeys(o.strategy for o in outcomes):
        mine = [o for o in outcomes if o.strategy == strategy and o.localised]
        if mine:
            first = sum(o.localised == "hit" for o in mine)
            hits = sum(o.localised.startswith("hit") for o in mine)
            rows.append(
                f"\n{strategy}: the bug's function shown to the first candidate {first}/"
                f"{len(mine)}, to some candidate {hits}/{len(mine)}"
            )
    return "\n".join(rows)
