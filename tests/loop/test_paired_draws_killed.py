"""`run --draws-from` with SIGKILL: a baseline whose run a kill cut short is refused until it
is resumed to the end, and a memory arm killed while it reuses the baseline's draws resumes
with every reused attempt still the baseline's, none asked of the model again and no
evidence counted twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.log import EpisodeLog
from tests.helpers.killing import cli_code, killed, stopped_at
from tests.loop.test_paired_draws import (
    LESSON,
    actor_calls,
    answers,
    argv,
    run,
    server,
    task_file,
)
from tests.memory.helpers import plant


def runs(memory: Path) -> list[str]:
    if not (memory / "episodes.db").exists():
        return []
    return [row["id"] for row in EpisodeLog(memory / "episodes.db", read_only=True).runs()]


def run_id(memory: Path) -> str:
    (only,) = runs(memory)
    return only


def test_a_baseline_cut_short_is_refused_until_it_is_resumed_to_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks, base = task_file(tmp_path / "tasks.yaml"), tmp_path / "base"
    arm = ["--strategy", "retry[memory]", "--draws-from", str(base)]
    with server() as fake:
        baseline = argv(fake, tasks, base, "--strategy", "retry")
        point = "mulligan.memory.log:EpisodeLog.start_episode"
        killed(stopped_at(point, 3, cli_code(baseline), tmp_path / "reached"))  # at task t2
        assert run(fake, tasks, tmp_path / "arm", *arm) == 2
        err = capsys.readouterr().err
        assert f"--resume {run_id(base)}" in err and "did not finish" in err
        assert runs(tmp_path / "arm") == []  # nothing started
        assert run(fake, tasks, base, "--strategy", "retry", "--resume", run_id(base)) == 1
        assert run(fake, tasks, tmp_path / "arm", *arm) == 1
    assert {key: a for key, (a, _) in answers(tmp_path / "arm").items()} == {
        key: a for key, (a, _) in answers(base).items()
    }  # no lesson in the arm's memory: every attempt the baseline's


def test_a_memory_arm_killed_while_reusing_draws_resumes_them_as_the_baselines(
    tmp_path: Path,
) -> None:
    tasks, base, arm = task_file(tmp_path / "tasks.yaml"), tmp_path / "base", tmp_path / "arm"
    with server() as fake:
        assert run(fake, tasks, base, "--strategy", "retry") == 1
        memory = Memory(arm, HashEmbedding())
        plant(memory, "l1", LESSON, family="capitals", status="validated")
        del memory
        paired = ["--strategy", "retry[memory]", "--draws-from", str(base)]
        point, code = "mulligan.memory.log:EpisodeLog.log_attempt", argv(fake, tasks, arm, *paired)
        killed(stopped_at(point, 3, cli_code(code), tmp_path / "reached"))  # t1's trial 2
        start = len(fake.requests)
        assert run(fake, tasks, arm, *paired, "--resume", run_id(arm)) == 1
        assert actor_calls(fake, start) == 0  # the rest were the baseline's
    mine, theirs = answers(arm), answers(base)
    assert len(mine) == 5 and mine[("t0", 1)] == ("Canberra", ["l1"])
    assert all(mine[key][0] == theirs[key][0] for key in mine if key != ("t0", 1))
    log = EpisodeLog(arm / "episodes.db", read_only=True)
    assert all(row["ended_at"] for row in log.episodes())
    (lesson,) = Memory(arm, HashEmbedding()).lessons(["l1"])
    assert lesson.validity.helped == 1  # the one attempt shown it, counted once
