"""`run` killed with SIGKILL (a real child process) while a check runs in the box leaves the
box's scratch directory and the task's workspace in TMPDIR; the next run (here `bench`)
removes them, and only them: never one whose process still runs, nor anything unmarked,
nor what a link points to, nor the directory it runs in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from mulligan.sandbox.marked import OWNER, marked_directory, remove_abandoned
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.helpers.killing import cli_code, environment, killed, stopped_at

TASK = """\
id: listed
prompt: Say done.
workspace: {notes.txt: "kept\\n"}
checks:
  - {type: command, command: "cat notes.txt"}
"""


def done(body: object) -> FakeReply:
    return FakeReply(content="done")


def test_the_next_run_removes_what_a_killed_run_left_in_tmpdir_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "task.yaml").write_text(TASK)
    env = environment(TMPDIR=str(scratch))
    with FakeOpenAIServer(policy=done) as server:
        endpoint = ["--base-url", server.base_url, "--embedding", "hash", "--model", "m"]
        argv = ["run", str(tmp_path / "task.yaml"), "--memory", str(tmp_path / "mem"), *endpoint]
        point = "mulligan.sandbox.box:_run"  # the check's scratch and the workspace are made
        killed(stopped_at(point, 1, cli_code(argv), tmp_path / f"ready-{uuid.uuid4()}", env))
        left = sorted(scratch.iterdir())
        names = sorted(p.name.rsplit("-", 1)[0] for p in left if p.is_dir())
        assert names == ["mulligan-sandbox", "mulligan-ws"], left
        assert all(Path(f"{p}{OWNER}").is_file() for p in left if p.is_dir())
        workspace = next(p for p in left if p.name.startswith("mulligan-ws-"))
        assert (workspace / "notes.txt").read_text() == "kept\n"
        dead = Path(f"{workspace}{OWNER}").read_bytes()

        # what it did not make: no marker; a marker that is not one; a link marked dead
        (scratch / "mulligan-ws-unmarked").mkdir()
        (scratch / "mulligan-ws-unreadable").mkdir()
        (scratch / f"mulligan-ws-unreadable{OWNER}").write_text("{not json")
        (scratch / "mulligan-ws-link").symlink_to(tmp_path / "mem")
        (scratch / f"mulligan-ws-link{OWNER}").write_bytes(dead)
        # the directory the next run runs in, marked as a dead process's
        here = scratch / "mulligan-ws-here"
        here.mkdir()
        (scratch / f"mulligan-ws-here{OWNER}").write_bytes(dead)
        kept = sorted(p for p in scratch.iterdir() if p not in left)

        monkeypatch.setattr(tempfile, "tempdir", str(scratch))
        with marked_directory("mulligan-ws-") as alive:  # this process's, which runs
            bench = ["bench", str(tmp_path / "task.yaml"), "--out", str(tmp_path / "out"),
                     "--strategies", "react", *endpoint]  # fmt: skip
            after = subprocess.run(
                [sys.executable, "-m", "mulligan.cli", *bench],
                capture_output=True, text=True, env=env, timeout=300, cwd=here,
            )  # fmt: skip
            assert after.returncode == 0, after.stderr
            said = f"removed 2 directories that killed mulligan processes left in {scratch}"
            assert said in after.stderr
            assert not any(os.path.lexists(p) for p in left)
            now = sorted(scratch.iterdir())  # the bench's own removed as it ended
            assert now == sorted([*kept, alive, Path(f"{alive}{OWNER}")])
            assert json.loads(Path(f"{alive}{OWNER}").read_text())["pid"] == os.getpid()
        assert (tmp_path / "mem").is_dir() and (scratch / "mulligan-ws-link").is_symlink()
        assert remove_abandoned([here / "sub"]) == []  # what holds a directory kept is kept
        assert remove_abandoned() == [here]
