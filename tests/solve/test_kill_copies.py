"""`solve` killed with SIGKILL (a real child process) leaves the copies of the project it
worked in behind in TMPDIR; the next `solve` removes them, and only them: never a copy
whose solve still runs, nor anything it did not make, and nothing of a project."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from mulligan.sandbox.marked import OWNER, remove_abandoned
from mulligan.schema import Task
from mulligan.solve.copies import COPY, Project, ProjectCopies
from mulligan.testing import FakeOpenAIServer
from tests.helpers.killing import cli_code, environment, killed, stopped_at
from tests.helpers.solving import scripted
from tests.solve.test_kill_apply import FIX_TURNS, a_project, nothing_done, state
from tests.solve.test_solve import make_project, solve_args


def test_the_next_solve_removes_the_copies_a_killed_solve_left_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    project = a_project(tmp_path)
    before = state(project)
    with FakeOpenAIServer(policy=scripted(*FIX_TURNS)) as server:  # killed mid-attempt
        argv = solve_args(server, project, tmp_path / "mem", "--trials", "1", "--yes")
        env = environment(TMPDIR=str(scratch))
        point = "mulligan.solve.copies:ProjectCopies.changes"  # its attempt's copy is made
        killed(stopped_at(point, 1, cli_code(argv), tmp_path / f"ready-{uuid.uuid4()}", env))
    left = sorted(scratch.iterdir())
    (marker,) = [p for p in left if p.name.endswith(OWNER)]
    (copy,) = [p for p in left if p.is_dir()]
    assert (copy / "calc.py").exists() and marker.name == copy.name + OWNER
    dead = marker.read_bytes()
    (copy / "locked").mkdir()  # as an attempt may leave it: not to be listed nor written
    (copy / "locked" / "made.txt").write_text("")
    (copy / "locked").chmod(0)

    # what it did not make: no marker; a marker that is not one; and the killed solve's
    # marker copied beside a link to the project, named as a copy
    made = {name: scratch / name for name in (f"{COPY}unmarked", f"{COPY}unreadable", "other")}
    for path in made.values():
        path.mkdir()
        (path / "keep.txt").write_text("not mulligan's\n")
    (scratch / f"{COPY}unreadable{OWNER}").write_text("{not json")
    (scratch / f"{COPY}link").symlink_to(project)
    (scratch / f"{COPY}link{OWNER}").write_bytes(dead)
    kept = sorted(p for p in scratch.iterdir() if p not in (copy, marker))

    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    other = make_project(tmp_path / "other-project")
    with ProjectCopies(Project(other))(Task(id="t", prompt="p")) as alive:  # this process's
        with FakeOpenAIServer(policy=nothing_done) as server:
            argv = solve_args(server, project, tmp_path / "mem", "--trials", "1")
            done = subprocess.run(
                [sys.executable, "-m", "mulligan.cli", *argv],
                capture_output=True, text=True, env=env, timeout=300,
            )  # fmt: skip
        assert done.returncode == 1, done.stderr  # the model changed nothing
        said = f"removed 1 directory that killed mulligan processes left in {scratch}"
        assert said in done.stderr
        assert not os.path.lexists(copy) and not os.path.lexists(marker)
        assert (alive / "calc.py").exists() and Path(f"{alive}{OWNER}").exists()
        now = sorted(scratch.iterdir())  # the later solve's own copies removed as it ended
        assert now == sorted([*kept, alive, Path(f"{alive}{OWNER}")])
    assert all((path / "keep.txt").exists() for path in made.values())
    assert (scratch / f"{COPY}link").is_symlink()
    assert state(project) == before

    # a project of the user's that is, or lies in, a directory named and marked as a copy
    inside = make_project(scratch / f"{COPY}project")
    (scratch / f"{COPY}project{OWNER}").write_bytes(dead)
    assert remove_abandoned([inside]) == []
    assert remove_abandoned([inside / "sub"]) == [] and (inside / "calc.py").exists()
    assert remove_abandoned([project]) == [inside]  # what kept it: it was the project
