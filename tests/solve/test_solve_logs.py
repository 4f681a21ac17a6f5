"""benchmarks/solve_logs.py on a log written here: imagined text and runs of repeats."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mulligan.memory.log import EpisodeLog
from mulligan.schema import Attempt, Step, ToolCall, ToolResult, Verdict
from tests.helpers.logged_runs import log_run

ROOT = Path(__file__).resolve().parents[2]


def _step(index: int, text: str, status: str = "ok") -> Step:
    call = ToolCall(id=f"c{index}", name="shell", arguments='{"command": "ls"}')
    result = ToolResult(call_id=call.id, name="shell", status=status, output="x")  # type: ignore[arg-type]
    return Step(index=index, text=text, tool_calls=[call], results=[result])


def test_it_counts_imagined_text_and_runs_of_repeats(tmp_path: Path) -> None:
    action = 'Action: shell\nAction Input: {"command": "ls"}'
    imagined = "\nAction Output: a.py\nThought: more"

    def attempt(trial: int, last: bool) -> Attempt:
        if trial == 1:  # logged by older code: the whole reply kept as the step's text
            steps = [
                _step(0, action + imagined),
                *(_step(i, action, "repeated") for i in (1, 2, 3)),
            ]
        else:  # today's: the rest kept apart, and two repeats only
            steps = [_step(0, action), _step(1, action, "repeated"), _step(2, action, "repeated")]
            steps[0].discarded = imagined
        return Attempt(task_id="", trial=trial, protocol="text", steps=steps)

    memory = tmp_path / "runs" / "react" / "proj" / "memory"
    memory.mkdir(parents=True)
    failed = Verdict(passed=False, score=0.0)
    log_run(
        EpisodeLog(memory / "episodes.db"), "r1", {}, {"react": {"t": [failed, failed]}}, attempt
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "solve_logs.py"), str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "2 attempts, 7 steps"
    assert lines[1] == "text steps that acted: 7; went on past their action: 2"
    share = 2 * len(imagined) / (7 * len(action) + 2 * len(imagined))
    assert lines[2].endswith(f"({share:.0%})") and f"{2 * len(imagined)} of" in lines[2]
    assert lines[3] == "attempts with 3+ steps in a row of only repeated calls: 1"
    assert lines[4] == "repeat-only steps in them: 3"


def test_no_logs_is_said_and_exits_2(tmp_path: Path) -> None:
    script = str(ROOT / "benchmarks" / "solve_logs.py")
    done = subprocess.run([sys.executable, script, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "no logged attempts" in done.stderr
