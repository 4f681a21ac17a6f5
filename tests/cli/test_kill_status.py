"""A run killed with SIGKILL (a real `mulligan run`) leaves its run marked running in the log;
once its process is gone every reader reads it as interrupted. A resume takes the run over:
it reads running while the resuming process works on it (whatever its manifest says), then
interrupted if that one is killed too, and finished once a resume completes it; a second
resume while one works on the run is refused, naming that process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.log import EpisodeLog, run_owner
from mulligan.memory.reading import MemoryReader
from mulligan.report.stats import collect
from mulligan.testing import FakeReply
from tests.cli.test_resume import (
    HoldFirst,
    environment,
    is_reflection,
    resumed,
    run_killed_holding,
)


class HoldUntilTold(HoldFirst):
    """Every reflection waits until the test lets it go (`go`), after signalling it arrived."""

    def __init__(self) -> None:
        super().__init__("reflection")
        self.go = threading.Event()

    def __call__(self, body: dict[str, Any]) -> FakeReply:
        planned = super().__call__(body)
        if is_reflection(body):
            self.arrived.set()
            self.go.wait(timeout=120)
            planned.delay = 0.0
        return planned


def statuses(memory: Path, run_id: str) -> set[str]:
    """The run's status as each reader of the log reads it (opened to write, and only read)."""
    log = Memory(memory, HashEmbedding()).log
    found = {log.run(run_id)["status"], collect(log, run_id).status}  # type: ignore[index]
    found |= {run["status"] for run in log.runs() if run["id"] == run_id}
    log.close()
    found |= {run.status for run in MemoryReader(memory).runs() if run.id == run_id}
    return found


def test_a_killed_run_reads_interrupted_and_a_resume_owns_it_until_it_finishes(
    tmp_path: Path,
) -> None:
    mem = tmp_path / "mem"
    with run_killed_holding(tmp_path, "reflection", "reflexion") as (server, _, argv, run_id):
        assert statuses(mem, run_id) == {"interrupted"}

        holding = HoldUntilTold()
        server.policy = holding
        again = [*argv, "--resume", run_id]
        process = subprocess.Popen(
            [sys.executable, "-m", "mulligan.cli", *again],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment(),
        )  # fmt: skip
        try:
            assert holding.arrived.wait(timeout=120), "the resume never asked for a reflection"
            assert statuses(mem, run_id) == {"running"}  # the resuming process's now
            owner = EpisodeLog(mem / "episodes.db", read_only=True).run(run_id)["owner"]  # type: ignore[index]
            assert json.loads(owner)["pid"] == process.pid
            second = resumed(again)  # a second process on the same run, while the first works
            assert second.returncode == 2, second.stderr
            assert f"still running, in process {process.pid}" in second.stderr
            owner = EpisodeLog(mem / "episodes.db", read_only=True).run(run_id)["owner"]  # type: ignore[index]
            assert json.loads(owner)["pid"] == process.pid  # the first one's still
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            holding.go.set()
        assert statuses(mem, run_id) == {"interrupted"}

        server.policy = HoldFirst("none")  # everything answered at once
        done = resumed([*again, "--json"])
        assert done.returncode == 0, done.stderr
    assert statuses(mem, run_id) == {"finished"}


def a_run_then_edited(path: Path, run_id: str, *statements: str) -> None:
    """A log at `path` holding one run started by this process, then changed by hand."""
    log = EpisodeLog(path)
    log.start_run(run_id, {"command": "run"})
    log.close()
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        for statement in statements:
            connection.execute(statement)


def test_a_log_written_before_runs_named_their_process_opens_and_reads_its_runs_as_logged(
    tmp_path: Path,
) -> None:
    """An older log, only read, shows its runs as they were logged; opened to write, it gains
    the column, its runs with no process named (read as logged), and new runs name theirs."""
    path = tmp_path / "episodes.db"
    a_run_then_edited(path, "old", "alter table runs drop column owner",
                      "delete from migrations where name = '008_run_owner'")  # fmt: skip
    reading = EpisodeLog(path, read_only=True)
    assert [(run["id"], run["status"]) for run in reading.runs()] == [("old", "running")]
    writing = EpisodeLog(path)
    assert writing.migrated == ["008_run_owner"]
    writing.start_run("new", {"command": "run"})
    owners = {run["id"]: run["owner"] for run in writing.runs()}
    assert owners["old"] is None and json.loads(owners["new"])["pid"] == os.getpid()
    assert [run["status"] for run in writing.runs()] == ["running", "running"]


def test_a_run_whose_recorded_process_is_unreadable_reads_as_logged_and_resumes(
    tmp_path: Path,
) -> None:
    """The process named is a hint about liveness, not a record the run needs: one the log
    holds garbled (a hand-edited or damaged log) is read as naming none, never a traceback
    for every reader of the log."""
    path = tmp_path / "episodes.db"
    a_run_then_edited(path, "r", "update runs set owner = '{not json'")
    assert [run["status"] for run in EpisodeLog(path, read_only=True).runs()] == ["running"]
    assert run_owner(EpisodeLog(path, read_only=True).run("r")) is None  # type: ignore[arg-type]
