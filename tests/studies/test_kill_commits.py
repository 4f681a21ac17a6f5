"""A repeated study with self-tests and candidates drawn for selection (`bench --repeats 2
--self-tests 2`, retry, reflexion and select-diverse) killed with SIGKILL just before, or just
after, the k-th commit of its episode log, wherever in mulligan that write is, and resumed:
every (strategy, task, repeat) ends with one finished episode holding the attempts, checks,
charges and picks of an uninterrupted run, no attempt logged twice, and the same report.

The kill points are spread over the run's commits, counted by a traced run of it, so that
they follow the study whatever writes mulligan adds or folds."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mulligan.memory.log import EpisodeLog
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.helpers.pause_points import environment, killed_at
from tests.loop.test_kill_points import WALL_CLOCK, figures, finished, resumed_here

TASKS = """\
- id: capital
  family: capitals
  prompt: What is the capital city of Australia? Answer with one word.
  checks: [{type: exact_match, answer: Canberra, name: capital}]
- id: double
  family: code
  prompt: Write a function f(x) that returns twice x.
  checks:
    - {type: python_tests, tests: "assert f(3) == 6", entry_point: f, name: example}
    - {type: python_tests, tests: "assert f(5) == 10", entry_point: f, name: hidden, visibility: hidden}
"""


def scripted(body: dict[str, Any]) -> FakeReply:
    """By content only: the capital right once a reflection names it; the code right once
    told so or asked for a plan first (select-diverse's second approach); two self-tests,
    one of them wrong."""
    messages = body["messages"]
    first, seen = str(messages[0]["content"]), json.dumps(messages)
    if first.startswith("You review a failed attempt"):
        said = {"diagnosis": "Answer Canberra; return x * 2.", "lesson": "Check.", "replaces": []}
        return FakeReply(content=json.dumps(said))
    if first.startswith("You write unit tests"):
        return FakeReply(content="```python\nassert f(2) == 4\nassert f(1) == 3\n```")
    if "twice x" in seen:
        right = "x * 2" in seen or "plan" in seen
        return FakeReply(content=f"```python\ndef f(x):\n    return x * {2 if right else 3}\n```")
    return FakeReply(content="Canberra" if "Canberra" in seen else "Sydney")


def bench_args(server: FakeOpenAIServer, tasks: Path, out: Path) -> list[str]:
    return [
        "bench", str(tasks), "--strategies", "retry,reflexion,select-diverse", "--trials", "2",
        "--self-tests", "2", "--repeats", "2", "--temperature", "0.7",
        "--base-url", server.base_url, "--out", str(out), "--embedding", "hash",
    ]  # fmt: skip


def held(out: Path, run_id: str) -> dict[str, Any]:
    """Each episode's attempts (answer, checks, charges, pick), the attempts logged, the
    self-tests kept and the report's figures, wall-clock ones aside."""
    log = EpisodeLog(out / "memory" / "episodes.db", read_only=True)
    episodes = {}
    for row in log.episodes(run_id):
        episode = log.episode(row["id"])
        assert episode is not None and row["ended_at"], row["id"]
        episodes[row["id"].removeprefix(run_id)] = [
            (a.trial, a.answer, a.stop_reason, [(c.name, c.passed) for c in v.checks],
             {role: u.model_dump() for role, u in sorted(a.usage_by_role.items())},
             a.selection.model_dump() if a.selection else None)
            for a, v in zip(episode.attempts, episode.verdicts, strict=True)
        ]  # fmt: skip
    query = (
        "select count(*) from attempts a join episodes e on a.episode_id = e.id where run_id = ?"
    )
    report = (out / "report.md").read_text().replace(run_id, "RUN").replace(str(out), "OUT")
    return {
        "episodes": episodes,
        "attempts": log.db.conn.execute(query, [run_id]).fetchone()[0],
        "self-tests": sorted(json.dumps(s, sort_keys=True) for s in log.run_self_tests(run_id)),
        "report": figures(
            re.sub(r"^- run: .*$|^Generated at .*$", "", report, flags=re.M), WALL_CLOCK
        ),
    }


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeOpenAIServer, Path]]:
    tasks = tmp_path_factory.mktemp("tasks") / "tasks.yaml"
    tasks.write_text(TASKS)
    with FakeOpenAIServer(policy=scripted) as server:
        yield server, tasks


@pytest.fixture(scope="module")
def uninterrupted(
    study: tuple[FakeOpenAIServer, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], int]:
    """The whole run's record, and how many commits its log made (a traced run's count)."""
    server, tasks = study
    out = tmp_path_factory.mktemp("whole")
    whole = held(out, finished(bench_args(server, tasks, out)))
    trace = out / "trace"
    traced = [sys.executable, "-m", "tests.helpers.pause_points", "trace", "0", str(trace)]
    done = subprocess.run(
        [*traced, *bench_args(server, tasks, out / "traced")],
        capture_output=True, text=True, timeout=120, env=environment(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    commits = sum(line.startswith("commit ") for line in trace.read_text().splitlines())
    return whole, commits


def test_the_uninterrupted_study_draws_checks_and_picks_in_every_repeat(
    uninterrupted: tuple[dict[str, Any], int],
) -> None:
    whole, commits = uninterrupted
    assert len(whole["episodes"]) == 3 * 2 * 2 and commits > 50
    picked = whole["episodes"][":select-diverse:double:repeat2"][-1]
    assert picked[-1]["picks"] and picked[1].endswith("x * 2\n```")
    assert ("self-test 1: assert f(2) == 4", True) in picked[3]
    assert whole["episodes"][":reflexion:capital"][-1][1] == "Canberra"


@pytest.mark.parametrize(
    ("share", "point"), [(0.3, "commit"), (0.55, "committed"), (0.8, "committed")]
)  # just after a commit is where an answer logged before its checks ran is found
def test_a_repeated_study_killed_at_a_commit_and_resumed_ends_as_one_never_interrupted(
    study: tuple[FakeOpenAIServer, Path],
    uninterrupted: tuple[dict[str, Any], int],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    point: str,
    share: float,
) -> None:
    server, tasks = study
    whole, commits = uninterrupted
    argv = bench_args(server, tasks, tmp_path / "out")
    run_id = killed_at(point, round(share * commits), argv, tmp_path / "reached")
    assert resumed_here([*argv, "--resume", run_id], capsys) == run_id
    assert held(tmp_path / "out", run_id) == whole
