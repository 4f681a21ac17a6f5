"""The study: exact counts on a scripted policy, reproducible reports, kill-and-resume."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

from mulligan.cli import main
from mulligan.memory.log import EpisodeLog
from mulligan.report.report import REPORT_FILES, report_in
from mulligan.report.stats import collect, wilson
from mulligan.studies import demo
from mulligan.testing import FakeOpenAIServer
from tests.helpers.killing import cli_code, killed, stopped_at


def run_ids(text: str) -> list[str]:
    return re.findall(r"run id: (\w+)", text)


def solved(log: EpisodeLog, run_id: str) -> dict[str, list[int]]:
    return {s.label: s.solved_by_trial for s in collect(log, run_id).strategies}


def test_wilson_interval() -> None:
    low, high = wilson(3, 10)
    assert round(low, 3) == 0.108 and round(high, 3) == 0.603
    assert wilson(0, 0) == (0.0, 0.0)
    assert wilson(10, 10)[1] == 1.0


def test_demo_shows_reflexion_above_retry_above_react_with_the_scripted_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert all(line.startswith("[scripted model]") for line in printed.out.splitlines())
    run_id = run_ids(printed.err)[0]
    assert run_ids(printed.err) == [run_id, run_id]  # at the start and at the end
    counts = solved(EpisodeLog(out / "memory" / "episodes.db"), run_id)
    assert counts == demo.EXPECTED
    report = (out / "report.md").read_text()
    assert report.startswith(
        f"# mulligan study {run_id}: scripted demo model, not a language model"
    )
    assert "| react | 10 | 3/10 = 30% [11–60]" in report
    assert "| retry | 10 | 3/10 = 30% [11–60] | 6/10 = 60% [31–83] | 6/10 = 60% [31–83]" in report
    assert "| reflexion | 10 | 3/10 = 30% [11–60] | 10/10 = 100% [72–100]" in report
    assert "| reflexion-memory | 10 | 6/10 = 60% [31–83] | 10/10 = 100% [72–100]" in report
    # lessons written, retrieved, validated (only verification validates), refuted
    assert "| reflexion-memory | 8 | 3 | 0 | 0 |" in report
    assert "| demo/units-1 | unsolved | unsolved | solved (trial 2) | solved (trial 1) |" in report
    # paired: react 3, reflexion 10, the 7 discordant tasks all reflexion's: p = 2 / 2^7
    assert "| react | reflexion | 10 | 3 | 0 | 7 | 0 | 0.016 | +70 pts [+40, +100] |" in report
    # trial 1 on the tasks the memory showed something: the three later units tasks
    trial_1 = "| react, trial 1 | reflexion-memory, trial 1 (shown memory) | 3 | 0 | 0 | 3 | 0 |"
    assert trial_1 in report
    # after a failed trial 1: retry's scripted model repeats itself, reflexion's learns
    assert "| retry | 7 | 3/7 = 43% [16–75] | 11 | 8/11 = 73% [43–90] |" in report
    assert "| reflexion | 7 | 7/7 = 100% [65–100] | 7 | 0/7 = 0% [0–35] |" in report
    assert '- design: `"paired"`' in report and '- first_attempt_from: `"react"`' in report
    assert '- config.loop: `{"carried_reflections": 3, "carry": "full",' in report
    html = (out / "report.html").read_text()
    assert "scripted, not a language model" in html and "src='success_by_trial.svg'" in html
    assert "![tokens per success](tokens_per_success.svg)" in report
    for svg in ("success_by_trial.svg", "tokens_per_success.svg"):
        root = ElementTree.parse(out / svg).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert "(scripted model)" in (root.findtext("{http://www.w3.org/2000/svg}title") or "")


def test_report_rebuilds_byte_for_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    run_id = run_ids(capsys.readouterr().err)[0]
    first = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    again = tmp_path / "again"
    assert main(["report", run_id, "--memory", str(out / "memory"), "--out", str(again)]) == 0
    second = {p.name: p.read_bytes() for p in again.iterdir() if p.is_file()}
    # no price: no frontier in dollars
    assert sorted(first) == sorted(second) == [
        "frontier_seconds.svg", "frontier_tokens.svg", "outcomes.jsonl", "report.html",
        "report.md", "success_by_tokens.svg", "success_by_trial.svg", "tokens_per_success.svg",
    ]  # fmt: skip

    def without_stamp(data: bytes) -> bytes:
        return re.sub(rb"Generated at [^.<]*", b"", data)

    for name in first:
        assert without_stamp(first[name]) == without_stamp(second[name]), name


UNITS_TASKS = "\n".join(
    f'- id: {t.id}\n  family: units\n  prompt: "{t.prompt}"\n'
    f"  checks: [{{type: exact_match, answer: '{t.answer}'}}]"
    for t in demo.DEMO_TASKS
    if t.kind == "units"
)


def bench_process(
    server: FakeOpenAIServer, out: Path, tasks: Path, *extra: str
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}
    argv = [
        sys.executable, "-m", "mulligan.cli", "bench", str(tasks),
        "--strategies", "react,retry,reflexion", "--trials", "3", "--temperature", "0.7",
        "--base-url", server.base_url, "--out", str(out), "--embedding", "hash", *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def test_bench_killed_and_resumed_ends_with_the_same_counts(tmp_path: Path) -> None:
    tasks = tmp_path / "units.yaml"
    tasks.write_text(UNITS_TASKS)
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        whole = bench_process(server, tmp_path / "whole", tasks)
        out, err = whole.communicate(timeout=120)
        assert whole.returncode == 0, err
        whole_id = run_ids(err)[0]
        assert "reflexion" in out and "submitted answer passed" in out

        killed = bench_process(server, tmp_path / "killed", tasks)
        start = len(server.requests)
        deadline = time.monotonic() + 60
        while len(server.requests) - start < 12:  # well inside the second strategy
            assert time.monotonic() < deadline and killed.poll() is None
            time.sleep(0.01)
        killed.send_signal(signal.SIGKILL)
        _, err = killed.communicate()
        killed_id = run_ids(err)[0]
        resumed = bench_process(server, tmp_path / "killed", tasks, "--resume", killed_id)
        _, err = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, err
        assert server.violations == []
    whole_counts = solved(EpisodeLog(tmp_path / "whole" / "memory" / "episodes.db"), whole_id)
    resumed_counts = solved(EpisodeLog(tmp_path / "killed" / "memory" / "episodes.db"), killed_id)
    assert (
        resumed_counts
        == whole_counts
        == {"react": [0, 0, 0], "retry": [0, 0, 0], "reflexion": [0, 4, 4]}
    )
    assert (tmp_path / "killed" / "report.md").exists()


@pytest.mark.parametrize(
    ("point", "written"),
    [("mulligan.report.plots:tokens_per_success", "a plot"), ("os:replace", "a part-file")],
)
def test_a_bench_killed_while_writing_its_report_resumes_into_its_own_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], point: str, written: str
) -> None:
    """Killed (SIGKILL) with {written} of the report written, the rest not: no report file is
    left half-written, and the resume is let into --out (the files are the run's own) and
    writes the whole report."""
    tasks = tmp_path / "units.yaml"
    tasks.write_text(UNITS_TASKS.split("\n- id:")[0])
    out = tmp_path / "out"
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        argv = ["bench", str(tasks), "--strategies", "react", "--base-url", server.base_url,
                "--out", str(out), "--embedding", "hash"]  # fmt: skip
        _, err = killed(stopped_at(point, 1, cli_code(argv), tmp_path / "reached"))
        run_id = run_ids(err)[0]
        left = sorted(name for name in REPORT_FILES if (out / name).exists())
        for name in left:
            text = (out / name).read_text()
            ending = {".svg": "</svg>\n", ".html": "</html>"}.get(Path(name).suffix, "\n")
            assert text.endswith(ending), name
        assert main([*argv, "--resume", run_id]) == 0, capsys.readouterr().err
    assert report_in(out) == ([n for n in REPORT_FILES if (out / n).exists()], run_id)
    assert {"report.html", "outcomes.jsonl", "success_by_tokens.svg"} <= set(report_in(out)[0])


@pytest.mark.parametrize(
    ("strategies", "warned"),
    [("react,retry,reflexion", "`retry` cannot differ from `react`"), ("react,warming", None)],
)
def test_bench_warns_at_temperature_zero_where_a_strategy_redraws_at_it(
    tmp_path: Path, strategies: str, warned: str | None
) -> None:
    """retry at temperature 0 repeats its first draw; warming draws up its own ladder."""
    tasks = tmp_path / "units.yaml"
    tasks.write_text(UNITS_TASKS)
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        process = bench_process(
            server, tmp_path / "t0", tasks, "--temperature", "0", "--limit", "1",
            "--strategies", strategies,
        )  # fmt: skip
        _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    if warned:
        assert "warning: temperature 0 with several trials" in err and warned in err
    else:
        assert "warning" not in err


def test_passes_measure_what_the_memory_kept(tmp_path: Path) -> None:
    tasks = tmp_path / "units.yaml"
    tasks.write_text(UNITS_TASKS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        done = subprocess.run(
            [
                sys.executable, "-m", "mulligan.cli", "bench", str(tasks),
                "--strategies", "reflexion-memory", "--trials", "2", "--passes", "2",
                "--show-candidates",
                "--base-url", server.base_url, "--out", str(tmp_path / "out"), "--embedding", "hash",
            ],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    counts = solved(
        EpisodeLog(tmp_path / "out" / "memory" / "episodes.db"), run_ids(done.stderr)[0]
    )
    # the first pass learns the lesson on its first units task; the second starts with it
    assert counts == {"reflexion-memory": [3, 4], "reflexion-memory (pass 2)": [4, 4]}


def test_report_counts_rescues_and_answers_repeated_after_a_failure(tmp_path: Path) -> None:
    from mulligan.report.report import first_trial_rows, later_trial_rows, paired_rows
    from mulligan.schema import Attempt, Episode, Verdict

    log = EpisodeLog(tmp_path / "episodes.db")
    manifest = {
        "strategies": ["retry", "reflexion-memory"],
        "trials": 3,
        "task_order": ["a", "b", "c"],
    }
    log.start_run("r", manifest)

    def episode(task: str, answers: list[str], passed: list[bool]) -> None:
        ep = Episode(id=f"r:retry:{task}", run_id="r", task_id=task, strategy="retry")
        log.start_episode(ep)
        for trial, (answer, ok) in enumerate(zip(answers, passed, strict=True), start=1):
            attempt = Attempt(task_id=task, trial=trial, answer=answer)
            verdict = Verdict(passed=ok, score=float(ok))
            ep.attempts.append(attempt)
            ep.verdicts.append(verdict)
            log.log_attempt(ep, attempt, verdict)
        ep.passed = passed[-1]
        log.end_episode(ep)

    episode("a", ["x = 1", "x  =\n1", "x = 2"], [False, False, True])  # one repeat, rescued
    episode("b", ["y", "y", "y"], [False, False, False])  # two repeats, not rescued
    episode("c", ["z"], [True])  # passed at once: no later trial
    stats = collect(log, "r").strategies[0]
    assert stats.strategy == "retry" and (stats.failed_first, stats.rescued) == (2, 1)
    assert (stats.later_trials, stats.repeated_answers) == (4, 3)
    header, rows = later_trial_rows(collect(log, "r"))
    assert rows[0] == ["retry", "2", "1/2 = 50% [9–91]", "4", "3/4 = 75% [30–95]"]
    # reflexion-memory never ran (a run stopped early): no pair of it with n = 0
    assert paired_rows(collect(log, "r"))[1] == first_trial_rows(collect(log, "r"))[1] == []
