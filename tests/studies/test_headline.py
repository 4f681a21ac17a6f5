"""The report leads with its answer: the first lines after the title name the model and its
endpoint, the suite and n, the trials and the stopping rule, the strategies, and each strategy
against react and retry in words and in the paired table's own numbers; a table is never
wider than it needs (the success and cost tables are apart), and dollars appear only where
a price is known."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.memory.log import EpisodeLog
from mulligan.report.headline import Comparison
from mulligan.report.report import write_report
from mulligan.schema import Attempt, Verdict
from tests.helpers.logged_runs import log_episodes, log_run


def demo_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 0
    capsys.readouterr()
    return (tmp_path / "demo" / "report.md").read_text()


def paired_row(report: str, a: str, b: str) -> list[str]:
    """The cells of the paired comparison table's row for A against B."""
    section = report.split("## Paired comparison")[1].split("## ")[0]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[:2] == [a, b]:
            return cells
    raise AssertionError(f"no paired row {a} against {b}")


def test_the_demo_report_opens_with_what_ran_and_what_it_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = demo_report(tmp_path, capsys)
    head = report.split("## ")[0]  # everything before the first table's section
    setup = next(line for line in head.splitlines() if line.startswith("**scripted-demo"))
    assert "at the package's fake endpoint on 127.0.0.1" in setup
    assert "suite **demo**, n = 10 tasks" in setup
    assert "up to 3 trials a task, honest stopping" in setup
    assert "strategies: react, retry, reflexion, reflexion-memory" in setup
    assert "Solved (the submitted answer passed, up to 3 trials): react 3/10, retry 6/10" in head
    # each claim of the headline is the paired table's own figure
    claims = re.findall(
        r"(\d+) more of (\d+) than (\S+) \(\+(\d+) pts, 95% \[([^\]]+)\]\), p = ([\d.]+)", head
    )
    lines = [line for line in head.splitlines() if line.startswith("- ")]
    assert [line.split(" solved")[0] for line in lines] == [
        "- retry",
        "- reflexion",
        "- reflexion-memory",
    ]
    assert len(claims) == 5  # retry: react; reflexion and reflexion-memory: react and retry
    for line in lines:
        name = line[2:].split(" solved")[0]
        for more, n, baseline, points, interval, p in re.findall(
            r"(\d+) more of (\d+) than (\S+) \(\+(\d+) pts, 95% \[([^\]]+)\]\), p = ([\d.]+)", line
        ):
            cells = paired_row(report, baseline, name)
            assert cells[2] == n and int(cells[5]) - int(cells[4]) == int(more)
            assert cells[7] == p and cells[8] == f"+{points} pts [{interval}]"
    assert "react 3 more" not in head  # retry against react is said once, on retry's line
    assert "p = 0.016: a clear difference" in head and "p = 0.250: no clear difference" in head


def test_a_run_with_no_price_has_no_dollar_columns_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = demo_report(tmp_path, capsys)
    assert "$" not in report.split("## Paired comparison")[0]
    assert "cost/task" not in report and "0.0000" not in report
    assert "its cost is the tokens and seconds above" in report
    header = next(line for line in report.splitlines() if line.startswith("| strategy | n |"))
    assert header.count("|") - 1 <= 8  # the success table alone, not 14 columns


def logged(tmp_path: Path, made: dict[str, list[bool]]) -> str:
    """A one-trial run whose strategies solved the tasks marked True."""
    log = EpisodeLog(tmp_path / "episodes.db")
    tasks = [f"t{i}" for i in range(len(next(iter(made.values()))))]
    runs = {
        s: {t: [Verdict(passed=ok, score=float(ok))] for t, ok in zip(tasks, oks, strict=True)}
        for s, oks in made.items()
    }
    config = {"strategies": list(made), "task_order": tasks, "seed": 0, "model": "m",
              "endpoint": "http://127.0.0.1:9/v1", "suite": "mine.yaml",
              "config": {"loop": {"trials": 1, "stop": "oracle"}}}  # fmt: skip
    log_run(log, "hand", config, runs)
    write_report(log, "hand", tmp_path / "out")
    return (tmp_path / "out" / "report.md").read_text()


def test_fewer_and_as_many_are_said_as_such_and_a_missing_baseline_is_skipped(
    tmp_path: Path,
) -> None:
    report = logged(tmp_path, {
        "retry": [True, True, True, False],
        "reflexion": [True, False, False, False],
        "repair": [True, True, True, False],
    })  # fmt: skip
    head = report.split("## ")[0]
    assert "**m** at http://127.0.0.1:9/v1 · suite **mine.yaml**, n = 4 tasks" in head
    assert "up to 1 trial a task, oracle stopping" in head
    assert "- reflexion solved 2 fewer of 4 than retry (-50 pts" in head
    assert "- repair solved as many of 4 as retry (+0 pts, 95% [+0, +0]), p = 1.000" in head
    assert "than react" not in head  # react did not run: nothing is set against it


@pytest.mark.parametrize(
    "p, low, high, said",
    [
        (0.01, 0.1, 0.5, "a clear difference"),
        (0.3, -0.1, 0.4, "no clear difference"),
        (0.125, 0.1, 0.7, "borderline"),
        (0.04, -0.05, 0.3, "borderline"),
    ],
)
def test_the_verdict_reads_the_test_and_the_interval_together(
    p: float, low: float, high: float, said: str
) -> None:
    assert Comparison("b", "a", 10, 0, 4, p, low, high).verdict.startswith(said)


def test_an_interrupted_run_counts_the_tasks_it_was_given_not_those_it_reached(
    tmp_path: Path,
) -> None:
    log = EpisodeLog(tmp_path / "episodes.db")
    reached = {"t0": [Verdict(passed=True, score=1.0)], "t1": [Verdict(passed=False, score=0.0)]}
    config = {"command": "run", "strategies": ["react"], "tasks": ["t0", "t1", "t2", "t3"],
              "seed": 0, "suite": "mine.yaml", "config": {"loop": {"trials": 1}}}  # fmt: skip
    log.start_run("cut", config)  # as `mulligan run` writes its manifest; killed after two tasks
    log_episodes(log, "cut", {"react": reached}, lambda trial, last: Attempt(task_id="", trial=1))
    write_report(log, "cut", tmp_path / "out")
    head = (tmp_path / "out" / "report.md").read_text().split("## ")[0]
    assert "n = 4 tasks (finished: react 2 of 4)" in head
