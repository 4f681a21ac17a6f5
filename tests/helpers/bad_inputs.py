"""The bad inputs of tests/cli/test_bad_inputs.py: each builds one under a temporary directory and
gives the argv after `mulligan`."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import Lesson, LessonScope

GOOD_TASK = """\
- id: add
  prompt: What is 2 + 2?
  tools: [calculator]
  checks:
    - {type: numeric, value: 4}
"""


def task_file(tmp: Path, body: str, name: str = "tasks.yaml") -> Path:
    path = tmp / name
    path.write_text(body)
    return path


def a_memory(tmp: Path, name: str = "mem") -> Path:
    """A memory directory with an episode log and one stored lesson (hash embedding)."""
    directory = tmp / name
    memory = Memory(directory, HashEmbedding())
    lesson = Lesson(id="l1", text="Check the units first.", scope=LessonScope(family="demo"))
    memory.keep(lesson, persistent=True)
    memory.log.db.conn.close()  # as a finished process leaves it
    return directory


@dataclass
class Case:
    name: str
    setup: Callable[[Path], list[str]]
    """Builds the bad input under the directory; returns the arguments after `mulligan`."""
    says: list[str] = field(default_factory=list)
    """Words the message must contain (the place and the fix)."""
    config: str | None = None
    """A mulligan.toml written to the working directory."""
    env: dict[str, str] = field(default_factory=dict)


def _binary_task(tmp: Path) -> list[str]:
    (tmp / "bin.yaml").write_bytes(bytes(range(256)) * 4)
    return ["tasks", str(tmp / "bin.yaml")]


def _latin1_task(tmp: Path) -> list[str]:
    (tmp / "t.yaml").write_bytes("- id: caf\xe9\n  prompt: p\n".encode("latin-1"))
    return ["tasks", str(tmp / "t.yaml")]


def _empty_task(tmp: Path) -> list[str]:
    return ["tasks", str(task_file(tmp, ""))]


def _dir_without_task_files(tmp: Path) -> list[str]:
    (tmp / "suite").mkdir()
    (tmp / "suite" / "odd.yaml").mkdir()  # a directory named like a task file is not one
    return ["tasks", str(tmp / "suite")]


def _duplicate_ids_across_files(tmp: Path) -> list[str]:
    (tmp / "suite").mkdir()
    task_file(tmp / "suite", GOOD_TASK, "a.yaml")
    task_file(tmp / "suite", "# another\n" + GOOD_TASK, "b.yaml")
    return ["tasks", str(tmp / "suite")]


def _unknown_tool(tmp: Path) -> list[str]:
    return ["tasks", str(task_file(tmp, GOOD_TASK.replace("[calculator]", "[teleport]")))]


def _search_without_documents(tmp: Path) -> list[str]:
    return ["tasks", str(task_file(tmp, GOOD_TASK.replace("[calculator]", "[search]")))]


def _workspace_escapes(tmp: Path) -> list[str]:
    body = GOOD_TASK + "  workspace:\n    ../outside.txt: boom\n"
    return ["tasks", str(task_file(tmp, body))]


def _workspace_absolute(tmp: Path) -> list[str]:
    body = GOOD_TASK + "  workspace:\n    /etc/evil: boom\n"
    return ["tasks", str(task_file(tmp, body))]


def _tests_do_not_parse(tmp: Path) -> list[str]:
    body = GOOD_TASK + "    - type: python_tests\n      tests: 'assert f(1) == = 2'\n"
    return ["tasks", str(task_file(tmp, body))]


def _callable_does_not_import(tmp: Path) -> list[str]:
    body = GOOD_TASK + "    - {type: callable, function: 'no_such_module_xyz:check'}\n"
    return ["tasks", str(task_file(tmp, body))]


def _callable_without_function(tmp: Path) -> list[str]:
    body = GOOD_TASK + "    - {type: callable, function: 'json:no_such_function'}\n"
    return ["tasks", str(task_file(tmp, body))]


def _file_check_bad_regex(tmp: Path) -> list[str]:
    body = GOOD_TASK + "    - {type: file, path: out.txt, matches: '(unclosed'}\n"
    return ["tasks", str(task_file(tmp, body))]


def _foreign_database(where: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        directory = a_memory(tmp)
        path = directory / where
        path.unlink()
        connection = sqlite3.connect(path)
        connection.execute("CREATE TABLE notes (text)")
        connection.commit()
        connection.close()
        return ["memory", "list", "--memory", str(directory), "--embedding", "hash"]

    return setup


def _lessons_is_a_file(tmp: Path) -> list[str]:
    directory = tmp / "mem"
    directory.mkdir()
    (directory / "lessons").write_text("my notes")
    return ["memory", "list", "--memory", str(directory), "--embedding", "hash"]


def _chroma_is_a_file(tmp: Path) -> list[str]:
    directory = tmp / "mem"
    (directory / "lessons").mkdir(parents=True)
    (directory / "lessons" / "chroma").write_text("my notes")
    return ["memory", "retract", "abc", "--memory", str(directory)]


def _lock_is_a_directory(tmp: Path) -> list[str]:
    directory = a_memory(tmp)
    (directory / "lessons" / "lessons.lock").unlink()
    (directory / "lessons" / "lessons.lock").mkdir()
    return ["memory", "retract", "l1", "--memory", str(directory)]


def _jsonl(suite: str, line: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        (tmp / "data.jsonl").write_text(line + "\n")
        return ["tasks", suite, "--data", str(tmp / "data.jsonl")]

    return setup


def _check_line(line: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["tasks", str(task_file(tmp, GOOD_TASK + line))]


def _hash_memory_then(argv: list[str]) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        directory = a_memory(tmp)
        return [*argv, "--memory", str(directory)]

    return setup


def _memory_is_a_file(tmp: Path) -> list[str]:
    (tmp / "mem").write_text("not a directory")
    return ["memory", "list", "--memory", str(tmp / "mem"), "--embedding", "hash"]


def _memory_under_a_file(tmp: Path) -> list[str]:
    (tmp / "file").write_text("x")
    return ["episodes", "list", "--memory", str(tmp / "file" / "mem")]


def _corrupt_episode_log(tmp: Path) -> list[str]:
    directory = a_memory(tmp)
    (directory / "episodes.db").write_bytes(b"this is not sqlite at all " * 200)
    return ["episodes", "list", "--memory", str(directory)]


def _truncated_episode_log(tmp: Path) -> list[str]:
    directory = a_memory(tmp)
    db = directory / "episodes.db"
    connection = sqlite3.connect(db)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.execute("PRAGMA journal_mode=DELETE")
    connection.close()
    for extra in ("episodes.db-wal", "episodes.db-shm"):
        (directory / extra).unlink(missing_ok=True)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    return ["episodes", "list", "--memory", str(directory)]


def _corrupt_chroma(tmp: Path) -> list[str]:
    directory = a_memory(tmp)
    (directory / "lessons" / "chroma" / "chroma.sqlite3").write_bytes(b"garbage" * 1000)
    return ["memory", "list", "--memory", str(directory), "--embedding", "hash"]


def _other_embedding(tmp: Path) -> list[str]:
    directory = a_memory(tmp)
    # listing needs no embedding; searching with another one than the store's is an error
    return ["memory", "search", "capital", "--memory", str(directory), "--embedding", "hash:64"]


def _import(content: bytes) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        directory = a_memory(tmp)
        (tmp / "in.jsonl").write_bytes(content)
        argv = ["memory", "import", str(tmp / "in.jsonl"), "--embedding", "hash"]
        return [*argv, "--memory", str(directory)]

    return setup


GOOD_LESSON = Lesson(id="l2", text="Read the question twice.").model_dump_json().encode()


def _import_a_directory(tmp: Path) -> list[str]:
    directory = a_memory(tmp)
    (tmp / "in.jsonl").mkdir()
    argv = ["memory", "import", str(tmp / "in.jsonl"), "--embedding", "hash"]
    return [*argv, "--memory", str(directory)]


def _export_to_a_directory(tmp: Path) -> list[str]:
    directory = a_memory(tmp)
    (tmp / "out").mkdir()
    argv = ["memory", "export", "--out", str(tmp / "out"), "--embedding", "hash"]
    return [*argv, "--memory", str(directory)]


def _out_is_a_file(command: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        (tmp / "out").write_text("my notes")
        if command == "bench":
            return ["bench", "examples", "--out", str(tmp / "out"), "--base-url", "http://x/v1"]
        if command == "report":
            return ["report", "someid", "--out", str(tmp / "out")]
        return ["demo", "--out", str(tmp / "out")]

    return setup


def _flags(*argv: str) -> Callable[[Path], list[str]]:
    return lambda tmp: list(argv)


def _run(*flags: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["run", "examples", "--base-url", "http://127.0.0.1:9/v1", *flags]


def _bench(*flags: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["bench", "examples", "--base-url", "http://127.0.0.1:9/v1", *flags]


def _minilm_missing(command: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        (tmp / "empty").mkdir()
        flags = ["--embedding", f"minilm:{tmp / 'empty'}", "--memory", str(tmp / "mem")]
        if command == "run":
            return _run("--strategy", "reflexion-memory", *flags)(tmp)
        return _bench("--out", str(tmp / "out"), *flags)(tmp)

    return setup


def _report_unknown_run(tmp: Path) -> list[str]:
    directory = a_memory(tmp)
    return ["report", "nosuchrun", "--out", str(tmp / "rep"), "--memory", str(directory)]


def _report_corrupt_log(tmp: Path) -> list[str]:
    argv = _corrupt_episode_log(tmp)
    return ["report", "somerun", "--out", str(tmp / "rep"), "--memory", argv[-1]]


def _data(suite: str, content: bytes | None) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        path = tmp / "data.file"
        if content is None:
            path.mkdir()
        else:
            path.write_bytes(content)
        return ["tasks", suite, "--data", str(path)]

    return setup
