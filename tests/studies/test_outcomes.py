"""A run's per-task outcomes outlive its episode log: `mulligan report` writes them as JSON
lines, and `benchmarks/compare_runs.py` pairs runs from those files as from the logs."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mulligan.errors import UserError
from mulligan.memory import HashEmbedding, Memory
from mulligan.report.outcomes import read_outcomes
from mulligan.report.report import write_report
from mulligan.report.stats import collect
from mulligan.schema import SELF_TEST, Attempt, CheckResult, Usage, Verdict
from tests.helpers.logged_runs import log_run

COMPARE = Path(__file__).parents[2] / "benchmarks" / "compare_runs.py"


LOG = {  # strategy: task: [(self-tests passed, hidden passed), ...]
    "react": {"alarm": [(False, True)], "easy": [(True, True)]},
    # on `alarm` a wrong self-test failed a right answer, and the next answer was wrong
    "retry": {"alarm": [(False, True), (False, False)], "easy": [(True, True)]},
}


def verdict(own: bool, hidden: bool) -> Verdict:
    checks = [
        CheckResult(type="t", name=f"{SELF_TEST} 1", passed=own, score=float(own)),
        CheckResult(type="t", name="h", visibility="hidden", passed=hidden, score=float(hidden)),
    ]
    return Verdict.of(checks)


def charged(trial: int, last: bool) -> Attempt:
    made = Attempt(task_id="", trial=trial)
    made.charge("actor", Usage(prompt_tokens=90, completion_tokens=10))
    return made


def finished_run(
    tmp_path: Path, run_id: str = "r1", log: dict[str, Any] = LOG, seed: int = 0
) -> tuple[Memory, Path]:
    """A two-trial run logged by hand, and the outcomes its report wrote."""
    memory = Memory(tmp_path / "mem", HashEmbedding())
    made = {
        strategy: {task: [verdict(*pair) for pair in pairs] for task, pairs in tasks.items()}
        for strategy, tasks in log.items()
    }
    order = list(next(iter(log.values())))
    config = {"strategies": list(log), "trials": 2, "task_order": order, "seed": seed}
    log_run(memory.log, run_id, config, made, charged)
    out = tmp_path / "report"
    write_report(memory.log, run_id, out)
    return memory, out / "outcomes.jsonl"


def compare(*specs: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(COMPARE), *specs], capture_output=True, text=True, check=False
    )


def test_the_report_writes_each_tasks_outcome_and_reading_it_back_gives_the_same_numbers(
    tmp_path: Path,
) -> None:
    memory, outcomes = finished_run(tmp_path)
    lines = [json.loads(line) for line in outcomes.read_text().splitlines()]
    by_key = {(line["strategy"], line["task"]): line for line in lines}
    assert set(by_key) == {(s, t) for s in ("react", "retry") for t in ("alarm", "easy")}
    # retry's trial 1 on `alarm` passed (a false alarm sent it on); the answer it submitted
    # with two trials failed
    alarm = by_key[("retry", "alarm")]
    assert (alarm["submitted"], alarm["any_passed"]) == ([True, False], [True, True])
    assert alarm["tokens"] == [100, 200]
    assert all(line["run"] == "r1" for line in lines)
    direct = {s.strategy: s for s in collect(memory.log, "r1").strategies}
    assert len(read_outcomes(outcomes)) == 2
    for run, read in read_outcomes(outcomes):
        assert run == "r1"
        assert read.submitted == direct[read.strategy].submitted
        assert read.any_passed == direct[read.strategy].any_passed
        assert read.spent == direct[read.strategy].spent
        assert read.solved_by_trial == direct[read.strategy].solved_by_trial


def test_compare_runs_reads_outcome_files_as_it_reads_logs_and_scores_trial_1_by_budget(
    tmp_path: Path,
) -> None:
    memory, outcomes = finished_run(tmp_path)
    from_log = compare(f"{memory.log.path}:r1")
    from_file = compare(str(outcomes))
    assert from_log.returncode == from_file.returncode == 0, from_log.stderr + from_file.stderr
    assert from_log.stdout == from_file.stdout
    # with a budget of one trial both submitted retry's first answer on `alarm`, which passed
    assert "| react | retry | trial 1 | 2 | 2 | 0 | 0 | 0 | 1.000 | +0 pts [+0, +0] |" in (
        from_file.stdout
    )
    assert "| react | retry | last trial | 2 | 1 | 1 | 0 | 0 | 1.000 |" in from_file.stdout


def test_a_malformed_outcome_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    _, outcomes = finished_run(tmp_path)
    lines = outcomes.read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["submitted"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], json.dumps(broken), "not json"]) + "\n")
    with pytest.raises(UserError, match=r"bad\.jsonl:2: .*submitted"):
        read_outcomes(bad)
    bad.write_text(lines[0] + "\nnot json\n")
    done = compare(str(bad))
    assert done.returncode == 2 and f"{bad}:2:" in done.stderr and not done.stdout
    assert "Traceback" not in done.stderr


def test_compare_runs_gives_the_reports_interval_when_seeded_as_the_run_was(
    tmp_path: Path,
) -> None:
    """One bootstrap for both: across runs as within one, seeded by --seed (the run's)."""
    draw = random.Random(3)
    hits = {"react": [draw.random() < 0.4 for _ in range(40)]}
    hits["retry"] = [draw.random() < 0.6 for _ in range(40)]
    log = {
        name: {f"t{n}": [(hit, hit)] for n, hit in enumerate(made)} for name, made in hits.items()
    }
    _, outcomes = finished_run(tmp_path, log=log, seed=7)
    report = (outcomes.parent / "report.md").read_text()
    (within,) = [line for line in report.splitlines() if line.startswith("| react | retry |")]
    cells = within.split(" | ")[2:9]  # n to the interval, then tokens per extra success
    printed = compare(str(outcomes), "--seed", "7")
    assert printed.returncode == 0, printed.stderr
    (last,) = [line for line in printed.stdout.splitlines() if "| last trial |" in line]
    assert last.removesuffix(" |").split(" | ")[3:] == cells


def test_compare_runs_reads_a_smaller_budget_out_of_a_longer_run(tmp_path: Path) -> None:
    """`--budget K` scores each strategy as the same run with K trials: its honest stop
    submits what it would have by trial K (N = 3 read out of an N = 5 study)."""
    _, outcomes = finished_run(tmp_path)
    printed = compare(str(outcomes), "--budget", "1", "--pool")
    assert printed.returncode == 0, printed.stderr
    # with one trial retry submitted its first answer on `alarm`, which passed: 2 of 2
    assert "retry: 2/2 submitted answers passed with a budget of 1" in printed.stdout
    assert "| react | retry | trial 1 | 2 | 2 | 0 | 0 | 0 | 1.000 |" in printed.stdout
    assert "last trial" not in printed.stdout
    too_many = compare(str(outcomes), "--budget", "3")
    assert too_many.returncode == 2 and "--budget 3" in too_many.stderr
    assert "2 trials" in too_many.stderr and not too_many.stdout
