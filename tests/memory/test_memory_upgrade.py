"""`mulligan memory upgrade`: an episode log an older mulligan wrote brought up to date, and
nothing else changed; a log already up to date, a newer mulligan's, or none at all is left as
it is, and a log that cannot be written is refused in one line."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mulligan.memory.log as episode_log
from mulligan.inputs.memory_files import read_only
from mulligan.memory.log import EpisodeLog
from mulligan.memory.migrations import MIGRATIONS
from mulligan.schema import Verdict
from tests.cli.test_hostile_inputs import cli, refused
from tests.helpers.logged_runs import log_run
from tests.helpers.read_only import read_only as unwritable

ROOT = Path(__file__).resolve().parents[2]
LATEST = MIGRATIONS[-1][0]
TABLES = ("runs", "episodes", "attempts")
UNDO = {
    "007_reflection_replies": "drop table reflection_replies",
    "008_run_owner": "alter table runs drop column owner",
}
"""What takes a migration back out of a log (the latest's is what makes a log older)."""


def a_log(memory: Path, *, older: bool = True) -> Path:
    """A memory of one finished run; `older`: as before the latest migration."""
    log = EpisodeLog(memory / "episodes.db")
    verdicts = [Verdict(passed=False, score=0), Verdict(passed=True, score=1)]
    log_run(log, "r1", {"strategies": ["retry"]}, {"retry": {"t1": verdicts, "t2": verdicts}})
    log.db.conn.close()
    if older:
        with contextlib.closing(sqlite3.connect(memory / "episodes.db")) as connection, connection:
            connection.execute(UNDO[LATEST])
            connection.execute(f"delete from migrations where name = '{LATEST}'")
    return memory


def state(memory: Path) -> tuple[set[str], dict[str, int]]:
    """The migrations the log holds, and its rows per table (read without a side file made,
    where no writer left one)."""
    path = memory / "episodes.db"
    with contextlib.closing(read_only(path, Path(f"{path}-wal").exists())) as connection:
        done = {name for (name,) in connection.execute("select name from migrations")}
        rows = {t: connection.execute(f"select count(*) from {t}").fetchone()[0] for t in TABLES}
    return done, rows


def files(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def upgrade(memory: Path | str, capsys: pytest.CaptureFixture[str]) -> tuple[object, str, str]:
    return cli(["memory", "upgrade", "--memory", str(memory)], capsys)


def test_an_older_log_is_brought_up_to_date_naming_what_was_applied_and_left_closed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = a_log(tmp_path / "m")
    _, rows = state(memory)
    status, out, err = upgrade(memory, capsys)
    assert status == 0, err
    assert LATEST in out and "brought up to date" in out, out
    assert state(memory) == ({name for name, _ in MIGRATIONS}, rows)
    assert sorted(os.listdir(memory)) == ["episodes.db"]  # closed: every change in the file


def test_a_log_already_up_to_date_is_said_so_and_not_opened_to_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only read: it is said so even where nothing may be written."""
    memory = a_log(tmp_path / "m", older=False)
    before = files(memory), (memory / "episodes.db").stat().st_mtime_ns
    with unwritable(memory):
        status, out, err = upgrade(memory, capsys)
    assert status == 0, err
    assert "already up to date" in out and "nothing changed" in out, out
    assert (files(memory), (memory / "episodes.db").stat().st_mtime_ns) == before


def test_a_newer_mulligans_log_is_refused_and_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = a_log(tmp_path / "m")
    with contextlib.closing(sqlite3.connect(memory / "episodes.db")) as connection, connection:
        connection.execute("insert into migrations values ('999_from_a_newer_mulligan', 0)")
    before = files(memory)
    refused(upgrade(memory, capsys), "newer mulligan", "999_from_a_newer_mulligan")
    assert files(memory) == before


def test_what_holds_no_episode_log_is_refused_and_none_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory of lessons alone, an empty episodes.db, a chroma server (whose runs log in
    ~/.mulligan, which holds none here): there is no log to bring up to date, and a new one
    is no upgrade."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "lessons-only" / "lessons").mkdir(parents=True)
    refused(upgrade(tmp_path / "lessons-only", capsys), "no episode log")
    assert not (tmp_path / "lessons-only" / "episodes.db").exists()
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "episodes.db").touch()
    refused(upgrade(tmp_path / "empty", capsys), "episodes.db", "empty")
    refused(cli(["memory", "list", "--memory", str(tmp_path / "empty")], capsys), "empty")
    assert os.listdir(tmp_path / "empty") == ["episodes.db"]
    assert (tmp_path / "empty" / "episodes.db").stat().st_size == 0
    refused(upgrade("http://127.0.0.1:9", capsys), "chroma server", "--memory")
    assert not any((tmp_path / "home").iterdir())


def test_an_older_log_that_cannot_be_written_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = a_log(tmp_path / "m")
    before = files(memory)
    with unwritable(memory):
        refused(upgrade(memory, capsys), str(memory / "episodes.db"), "cannot be written")
    assert files(memory) == before


def test_an_older_log_another_process_is_writing_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It waits a while for the writer, then says so instead of a traceback; once the writer
    is done, the upgrade goes through."""
    memory = a_log(tmp_path / "m")
    monkeypatch.setattr(episode_log, "BUSY_SECONDS", 0.1)
    writer = sqlite3.connect(memory / "episodes.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        refused(upgrade(memory, capsys), str(memory / "episodes.db"), "another process")
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert LATEST not in state(memory)[0]
    assert upgrade(memory, capsys)[0] == 0
    assert LATEST in state(memory)[0]


def test_an_upgrade_killed_leaves_the_log_old_or_new_and_the_next_one_finishes(
    tmp_path: Path,
) -> None:
    """kill -9 at points after the log opened: the migrations are one transaction, so the log
    is the older one whole or the upgraded one, never between, and every row is kept."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ORT_DISABLE_TELEMETRY": "1"}
    command = [sys.executable, "-m", "mulligan.cli", "memory", "upgrade", "--memory"]
    every = {name for name, _ in MIGRATIONS}
    for n, delay in enumerate((0.0, 0.005, 0.02)):
        memory = a_log(tmp_path / f"m{n}")
        old, rows = state(memory)
        upgrading = subprocess.Popen([*command, str(memory)], env=env, stdout=subprocess.DEVNULL)
        while not (memory / "episodes.db-wal").exists() and upgrading.poll() is None:
            time.sleep(0.0005)
        time.sleep(delay)
        upgrading.send_signal(signal.SIGKILL)
        upgrading.wait()
        assert state(memory) in [(old, rows), (every, rows)]
        again = subprocess.run([*command, str(memory)], env=env, capture_output=True, text=True)
        assert again.returncode == 0, again.stderr
        assert state(memory) == (every, rows)
