"""A command that only reads a memory (`memory list`, `show`, `search`, `stats`, `export`,
`episodes list` and `show`, `report`, `view --bundle`) leaves every file of the memory
directory byte-identical, creates none (no SQLite side file) and migrates nothing.

The memory is made by a real run (`mulligan demo`: a study on a scripted endpoint, lessons
kept in a hash-embedded store); each command runs in its own process, as a user runs it, so
whatever a library writes when the process ends counts too.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mulligan.memory.log import EpisodeLog
from tests.helpers.chroma_server import chroma_server

__all__ = ["chroma_server"]  # a fixture
ROOT = Path(__file__).parents[2]


def mulligan(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return mulligan_with({}, *argv, cwd=cwd)


def mulligan_with(
    environment: dict[str, str], *argv: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ORT_DISABLE_TELEMETRY": "1", **environment}
    env.pop("MULLIGAN_EMBEDDING", None)  # the default embedding, as a user's shell has it
    return subprocess.run(
        [sys.executable, "-m", "mulligan.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def hashed(directory: Path) -> dict[str, str]:
    """Every file under the directory (side files and lock files too) and its digest."""
    return {
        path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )


def query(log: Path, sql: str) -> list[tuple[object, ...]]:
    """Read the log without touching it (the test must not write it either)."""
    connection = sqlite3.connect(f"{log.resolve().as_uri()}?immutable=1", uri=True)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def studied(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The memory of a finished demo study and its run id."""
    out = tmp_path_factory.mktemp("demo") / "study"
    done = mulligan("demo", "--out", str(out), cwd=out.parent)
    assert done.returncode == 0, done.stderr
    run_id = (done.stdout + done.stderr).split("run id: ")[1].split()[0]
    return out / "memory", run_id


def read_commands(memory: Path, run_id: str, elsewhere: Path) -> list[list[str]]:
    log = memory / "episodes.db"
    lesson = str(query(log, "select id from lessons where stored = 1 order by id limit 1")[0][0])
    episode = str(query(log, "select id from episodes order by id limit 1")[0][0])
    where = ["--memory", str(memory)]
    return [
        ["memory", "list", *where],
        ["memory", "list", "--json", *where],
        ["memory", "show", lesson, *where],
        ["memory", "search", "the answer to the task", *where],
        ["memory", "stats", *where],
        ["memory", "export", *where],
        ["episodes", "list", *where],
        ["episodes", "show", episode, *where],
        ["report", run_id, *where, "--out", str(elsewhere / "report")],
        ["view", run_id, *where, "--bundle", str(elsewhere / "bundle")],
    ]


def test_every_read_command_leaves_the_memory_byte_identical(
    studied: tuple[Path, str], tmp_path: Path
) -> None:
    memory, run_id = studied
    stored = query(memory / "episodes.db", "select count(*) from lessons where stored = 1")[0][0]
    assert stored, "the study kept no lesson: nothing here would be read"
    for argv in read_commands(memory, run_id, tmp_path):
        before = hashed(memory)
        done = mulligan(*argv, cwd=tmp_path)
        assert done.returncode == 0, f"{argv}: {done.stderr}"
        assert done.stdout.strip(), f"{argv} printed nothing"
        assert changed(before, hashed(memory)) == [], f"`mulligan {' '.join(argv[:2])}` wrote"


def test_list_shows_every_stored_lesson_with_its_counters_from_the_log(
    studied: tuple[Path, str], tmp_path: Path
) -> None:
    memory, _ = studied
    rows = query(
        memory / "episodes.db",
        "select id, json_extract(record, '$.validity.retrieved') from lessons where stored = 1",
    )
    listed = mulligan("memory", "list", "--json", "--memory", str(memory), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    import json

    shown = {
        r["id"]: r["validity"]["retrieved"] for r in map(json.loads, listed.stdout.split("\n")[:-1])
    }
    assert shown == {str(i): n for i, n in rows}


def test_a_log_an_older_mulligan_wrote_is_not_migrated_by_a_read(
    studied: tuple[Path, str], tmp_path: Path
) -> None:
    """The reading commands (those of the memory, and the viewer) say so and leave it as it
    is; the next command that writes brings it up to date."""
    memory = tmp_path / "memory"
    subprocess.run(["cp", "-a", str(studied[0]), str(memory)], check=True)
    connection = sqlite3.connect(memory / "episodes.db")
    with connection:
        connection.execute("drop table self_tests")  # as before its migration
        connection.execute("delete from migrations where name = '004_self_tests'")
    connection.close()
    commands = read_commands(memory, studied[1], tmp_path)
    for argv in [commands[0], commands[2], commands[3], commands[6], commands[9]]:
        before = hashed(memory)
        done = mulligan(*argv, cwd=tmp_path)
        assert done.returncode == 2, f"{argv}: {done.stdout} {done.stderr}"
        assert "older mulligan" in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert changed(before, hashed(memory)) == [], f"`mulligan {' '.join(argv[:2])}` wrote"
    assert "lacks migration 004_self_tests" in done.stderr
    EpisodeLog(memory / "episodes.db").db.conn.close()  # as the next command that writes opens it
    listed = mulligan("memory", "list", "--memory", str(memory), cwd=tmp_path)
    assert listed.returncode == 0 and listed.stdout.strip(), listed.stderr


def test_a_read_while_a_run_holds_the_log_open_sees_its_commits(
    studied: tuple[Path, str], tmp_path: Path
) -> None:
    """A run still writing keeps the log's side files: a read shares them and sees what the
    run has committed, and the log's own file is left as it is."""
    memory = tmp_path / "memory"
    subprocess.run(["cp", "-a", str(studied[0]), str(memory)], check=True)
    writer = sqlite3.connect(memory / "episodes.db")
    writer.execute("PRAGMA journal_mode = wal")
    with writer:
        writer.execute(
            "insert into episodes (id, run_id, task_id, strategy, position, passed, trials) "
            "values ('seen-while-open', 'r', 'a-task-written-meanwhile', 'react', 0, 0, 0)"
        )
    try:
        main_file = hashlib.sha256((memory / "episodes.db").read_bytes()).hexdigest()
        done = mulligan("episodes", "list", "--memory", str(memory), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "a-task-written-meanwhile" in done.stdout
        assert hashlib.sha256((memory / "episodes.db").read_bytes()).hexdigest() == main_file
    finally:
        writer.close()


def test_a_log_opened_to_read_before_a_run_starts_sees_that_runs_commits(tmp_path: Path) -> None:
    """The viewer left open: the log was closed (no side file) when it opened, then a run
    opened it and wrote."""
    path = tmp_path / "episodes.db"
    first = EpisodeLog(path)
    first.start_run("before", {})
    first.db.conn.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episodes.db"]
    reader = EpisodeLog(path, read_only=True)
    assert [run["id"] for run in reader.runs()] == ["before"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episodes.db"], "a side file made"
    writer = EpisodeLog(path)
    writer.start_run("meanwhile", {})
    assert [run["id"] for run in reader.runs()] == ["before", "meanwhile"]
    writer.start_run("later", {})
    assert [run["id"] for run in reader.runs()] == ["before", "meanwhile", "later"]


def test_a_store_on_a_chroma_server_is_listed_and_searched_there_without_a_local_log(
    tmp_path: Path, chroma_server: str
) -> None:
    """No local episode log is needed, and none is made, to read a server's lessons."""
    from mulligan.memory import HashEmbedding, Memory
    from mulligan.schema import Lesson, LessonScope

    writer = Memory(tmp_path / "writer", HashEmbedding(), store=chroma_server)
    for n, text in enumerate(["Quote file paths in shell commands.", "Sort before you bisect."]):
        writer.keep(Lesson(id=f"s{n}", text=text, scope=LessonScope(family="f")), persistent=True)
    home = tmp_path / "home"
    home.mkdir()
    env_home = {"HOME": str(home)}
    where = ["--memory", chroma_server, "--json"]
    listed = mulligan_with(env_home, "memory", "list", *where, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert sorted(line.split('"id": "')[1][:2] for line in listed.stdout.splitlines()) == [
        "s0",
        "s1",
    ]
    found = mulligan_with(
        env_home, "memory", "search", "sort before you bisect", *where, cwd=tmp_path
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[0].count('"id": "s1"') == 1
    assert list(home.rglob("*")) == [], "a local memory was made to read a server's"
