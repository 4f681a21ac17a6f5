"""A run's per-task outcomes as JSON lines (`outcomes.jsonl` beside the report): what a
paired comparison needs, small enough to keep with a study's write-up after its episode
log is gone, and read back by `benchmarks/compare_runs.py` as if from the log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mulligan.errors import UserError
from mulligan.inputs.paths import write_whole
from mulligan.report.stats import RunStats, StrategyStats, unit_of

FIELDS: dict[str, type] = {
    "run": str,
    "strategy": str,
    "pass": int,
    "task": str,
    "submitted": list,
    "any_passed": list,
    "tokens": list,
}
"""Each line's fields: with a budget of 1, 2, … trials, whether the submitted answer
passed, whether some attempt passed, and the tokens spent (and, in a repeated study, an
integer `repeat`)."""


def outcome_lines(stats: RunStats) -> list[str]:
    """A line a task (and, in a repeated study, a repeat: its `repeat` field)."""
    lines = []
    for s in stats.strategies:
        for unit, submitted in s.submitted.items():
            task, repeat = s.units.get(unit, (unit, 1))
            line = {"run": stats.run_id, "strategy": s.strategy, "pass": s.run_pass,
                    "task": task, "submitted": submitted, "any_passed": s.any_passed[unit],
                    "tokens": s.spent[unit]}  # fmt: skip
            lines.append(json.dumps(line | ({"repeat": repeat} if stats.repeats > 1 else {})))
    return lines


def write_outcomes(stats: RunStats, path: Path) -> None:
    write_whole(path, "".join(line + "\n" for line in outcome_lines(stats)))


def read_outcomes(path: Path) -> list[tuple[str, StrategyStats]]:
    """(run id, the strategy's numbers) for each run and strategy the file holds, in order;
    a line that is not an outcome raises, naming the file and line."""
    found: dict[tuple[str, str, int], StrategyStats] = {}
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if text.strip():
            line = _parsed(text, f"{path}:{number}")
            key = (line["run"], line["strategy"], line["pass"])
            s = found.setdefault(key, StrategyStats(line["strategy"], line["pass"]))
            repeat = int(line.get("repeat", 1))
            task = unit_of(line["task"], repeat)
            s.tasks += 1
            s.units[task] = (line["task"], repeat)
            s.submitted[task] = [bool(x) for x in line["submitted"]]
            s.any_passed[task] = [bool(x) for x in line["any_passed"]]
            s.spent[task] = [int(x) for x in line["tokens"]]
    for s in found.values():
        s.total(max((len(v) for v in s.submitted.values()), default=0))
    return [(run, s) for (run, _, _), s in found.items()]


def _parsed(text: str, where: str) -> dict[str, Any]:
    try:
        line = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{where}: not JSON ({exc}); an outcomes file is `mulligan report`'s "
                        "outcomes.jsonl, one task per line") from None  # fmt: skip
    if not isinstance(line, dict):
        raise UserError(f"{where}: a line must be a JSON object, not {type(line).__name__}")
    for name, kind in FIELDS.items():
        if not isinstance(line.get(name), kind):
            got = line.get(name)
            raise UserError(f"{where}: field {name!r} must be a {kind.__name__}, got {got!r}; "
                            "rebuild the file with `mulligan report`")  # fmt: skip
    if not isinstance(line.get("repeat", 1), int):
        raise UserError(f"{where}: field 'repeat' must be an int, got {line['repeat']!r}; "
                        "rebuild the file with `mulligan report`")  # fmt: skip
    lengths = {len(line[name]) for name in ("submitted", "any_passed", "tokens")}
    if len(lengths) != 1:
        raise UserError(f"{where}: 'submitted', 'any_passed' and 'tokens' must have one "
                        "entry per trial budget each")  # fmt: skip
    return line
