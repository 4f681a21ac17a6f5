"""benchmarks/solve_real.py end to end on its plumbing path (--smoke: a local project, the
scripted fake server on 127.0.0.1), and its definitions of the real bugs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "solve_real.py"

pytestmark = pytest.mark.timeout(900)  # each smoke run is ~12 s of CPU: a loaded machine needs more


def test_smoke_runs_every_strategy_and_the_second_bug_starts_from_a_lesson(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.jsonl"
    argv = [sys.executable, str(SCRIPT), "--smoke", "--work", str(tmp_path / "work")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [*argv, "--trials", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by = {(r["strategy"], r["bug"]): r for r in rows}
    assert sorted({r["strategy"] for r in rows}) == ["react", "reflexion-memory", "retry"]
    assert (
        not by["react", "tinycalc-add"]["passed"] and by["react", "tinycalc-add"]["attempts"] == 1
    )
    assert (
        by["retry", "tinycalc-mul"]["attempts"] == 2 and not by["retry", "tinycalc-mul"]["passed"]
    )
    first, second = by["reflexion-memory", "tinycalc-add"], by["reflexion-memory", "tinycalc-mul"]
    assert (first["passed"], first["attempts"], first["given_lessons"]) == (True, 2, 0)
    assert (second["passed"], second["attempts"]) == (True, 1) and second["given_lessons"] >= 1
    assert all(r["tokens"] > 0 and r["silent_attempts"] == 0 for r in rows)
    assert "| reflexion-memory | native | 2/2 | 1.5 | 1.5 |" in done.stdout
    assert "| 1/1 | 1/1 |" in done.stdout.splitlines()[-1]
    again = subprocess.run(
        [sys.executable, str(SCRIPT), "--table", str(out)], capture_output=True, text=True, env=env
    )
    assert again.returncode == 0 and again.stdout.strip() == done.stdout.strip()


def test_every_real_bug_is_one_line_in_a_known_project() -> None:
    """The benchmark's bug list, read by running it (tests import nothing from benchmarks/)."""
    code = (
        "import json, real_projects as r; print(json.dumps([[b.id, b.project, b.find, b.replace,"
        " b.project in r.SOURCES] for b in r.BUGS]))"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'benchmarks'}{os.pathsep}{ROOT}"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    bugs = json.loads(done.stdout)
    assert len(bugs) >= 10 and len({project for _, project, *_ in bugs}) >= 5
    assert all(known and find != replace for _, _, find, replace, known in bugs)
    assert all("\n" not in find + replace for _, _, find, replace, _ in bugs)
    assert len({bug_id for bug_id, *_ in bugs}) == len(bugs)


def _smoke(tmp_path: Path, *more: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(SCRIPT), "--smoke", "--work", str(tmp_path / "work")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [*argv, "--trials", "2", *more], capture_output=True, text=True, env=env, timeout=600
    )


def test_resume_runs_only_what_has_no_result_and_keeps_the_projects_memory(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.jsonl"
    first = _smoke(tmp_path, "--strategies", "reflexion-memory", "--out", str(out))
    assert first.returncode == 0, first.stderr
    rows = out.read_text().splitlines()
    assert len(rows) == 2
    # the second bug's result is lost (as when the run is killed during it)
    out.write_text(rows[0] + "\n")
    again = _smoke(tmp_path, "--strategies", "reflexion-memory", "--out", str(out), "--resume")
    assert again.returncode == 0, again.stderr
    assert "tinycalc-add" not in again.stderr  # done already: not solved again
    redone = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["bug"] for r in redone] == ["tinycalc-add", "tinycalc-mul"]
    second = redone[1]
    # the project's memory outlived the first invocation: bug 2 starts from bug 1's lesson
    assert (second["passed"], second["attempts"]) == (True, 1) and second["given_lessons"] >= 1
    assert "| reflexion-memory | native | 2/2 | 1.5 | 1.5 |" in again.stdout


def test_an_out_file_with_results_is_never_appended_to_without_resume(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    earlier = {"bug": "tinycalc-add", "project": "tinycalc", "strategy": "react"}
    earlier |= {"protocol": "native", "order": 1, "passed": False, "attempts": 1, "tokens": 9}
    earlier |= {"seconds": 1.0, "given_lessons": 0, "silent_attempts": 0, "exit": 1}
    out.write_text(json.dumps(earlier) + "\n")
    done = _smoke(tmp_path, "--strategies", "react", "--out", str(out))
    assert done.returncode == 2
    assert str(out) in done.stderr and "--resume" in done.stderr
    assert out.read_text() == json.dumps(earlier) + "\n"
    out.write_text(json.dumps(earlier) + "\n" + '{"bug": "cut short\n')
    broken = _smoke(tmp_path, "--strategies", "react", "--out", str(out), "--resume")
    assert broken.returncode == 2 and f"{out}:2:" in broken.stderr
    assert out.read_text().endswith("cut short\n")
    lone = _smoke(tmp_path, "--strategies", "react", "--resume")
    assert lone.returncode == 2 and "--resume needs --out" in lone.stderr


def test_resume_with_other_settings_is_refused_naming_the_setting(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    first = _smoke(tmp_path, "--strategies", "react", "--out", str(out))
    assert first.returncode == 0, first.stderr
    before = out.read_text()
    other = [sys.executable, str(SCRIPT), "--smoke", "--work", str(tmp_path / "work")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [*other, "--trials", "3", "--strategies", "retry", "--out", str(out), "--resume"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 2
    assert "--trials 3" in done.stderr and "2" in done.stderr and "settings.json" in done.stderr
    assert out.read_text() == before


def test_a_queue_given_a_projects_second_bug_alone_records_it_as_the_second(
    tmp_path: Path,
) -> None:
    """Seen in the d6b9fc5 run: a queue resumed with `--bugs` of one project's second bug
    recorded it as order 1, so the table did not count it as a second bug."""
    out = tmp_path / "results.jsonl"
    done = _smoke(tmp_path, "--strategies", "react", "--bugs", "tinycalc-mul", "--out", str(out))
    assert done.returncode == 0, done.stderr
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert (row["bug"], row["order"]) == ("tinycalc-mul", 2)
