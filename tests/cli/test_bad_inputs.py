"""Every bad input is one clear line, exit status 2, no traceback, and nothing the user had changes.

Each case (built by tests/helpers/bad_inputs.py) gives the argv for the real CLI entry point
(`mulligan.cli.main`, in process: the same code path as the console script but for
`sys.exit`). A few cases also run as a real `python -m mulligan.cli` process.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.memory import HashEmbedding, Memory
from tests.helpers.bad_inputs import (
    GOOD_LESSON,
    GOOD_TASK,
    Case,
    _bench,
    _binary_task,
    _callable_does_not_import,
    _callable_without_function,
    _check_line,
    _chroma_is_a_file,
    _corrupt_chroma,
    _corrupt_episode_log,
    _data,
    _dir_without_task_files,
    _duplicate_ids_across_files,
    _empty_task,
    _export_to_a_directory,
    _file_check_bad_regex,
    _flags,
    _foreign_database,
    _hash_memory_then,
    _import,
    _import_a_directory,
    _jsonl,
    _latin1_task,
    _lessons_is_a_file,
    _lock_is_a_directory,
    _memory_is_a_file,
    _memory_under_a_file,
    _minilm_missing,
    _other_embedding,
    _out_is_a_file,
    _report_corrupt_log,
    _report_unknown_run,
    _run,
    _search_without_documents,
    _tests_do_not_parse,
    _truncated_episode_log,
    _unknown_tool,
    _workspace_absolute,
    _workspace_escapes,
    a_memory,
    task_file,
)

CASES = [
    # task files
    Case("binary task file", _binary_task, ["bin.yaml", "UTF-8"]),
    Case("non-UTF-8 task file", _latin1_task, ["t.yaml", "UTF-8"]),
    Case("empty task file", _empty_task, ["tasks.yaml"]),
    Case("endless device as task file", _flags("tasks", "/dev/zero"), ["/dev/zero", "regular"]),
    Case("directory without task files", _dir_without_task_files, ["suite", "no task files"]),
    Case("duplicate ids across files", _duplicate_ids_across_files, ["a.yaml:1", "b.yaml:2"]),
    Case("unknown tool", _unknown_tool, ["tasks.yaml:3", "teleport", "calculator"]),
    Case("search without documents", _search_without_documents, ["tasks.yaml:3", "documents"]),
    Case("workspace path leaves the workspace", _workspace_escapes, ["tasks.yaml", "outside"]),
    Case("absolute workspace path", _workspace_absolute, ["tasks.yaml", "/etc/evil"]),
    Case("tests do not parse", _tests_do_not_parse, ["tasks.yaml:7", "tests", "parse"]),
    Case("callable does not import", _callable_does_not_import, ["tasks.yaml:6", "import"]),
    Case("callable has no such function", _callable_without_function, ["no_such_function"]),
    Case("file check with a bad regex", _file_check_bad_regex, ["tasks.yaml:6", "regex"]),
    Case(
        "task without checks",
        lambda tmp: ["tasks", str(task_file(tmp, "id: x\nprompt: p\n", "x.yaml"))],
        ["x.yaml:1", "no checks"],
    ),
    Case("numeric value nan", _check_line("    - {type: numeric, value: .nan}\n"), [":6"]),
    Case(
        "negative tolerance", _check_line("    - {type: numeric, value: 1, abs_tol: -1}\n"), [":6"]
    ),
    Case(
        "command timeout 0", _check_line("    - {type: command, command: x, timeout: 0}\n"), [":6"]
    ),
    # selection
    Case("unknown --ids", _flags("tasks", "examples", "--ids", "nope"), ["--ids", "nope"]),
    Case("--sample above the suite", _flags("tasks", "examples", "--sample", "999"), ["--sample"]),
    Case("--sample 0", _flags("tasks", "examples", "--sample", "0"), ["--sample"]),
    Case("--limit 0", _flags("tasks", "examples", "--limit", "0"), ["--limit"]),
    Case("--limit negative", _flags("tasks", "examples", "--limit", "-3"), ["--limit"]),
    Case("hotpotqa data is a directory", _data("hotpotqa", None), ["data.file"]),
    Case("hotpotqa data is binary", _data("hotpotqa", bytes(range(256))), ["data.file"]),
    Case("mbpp data is garbage", _data("mbpp", b"{not json\n"), ["data.file"]),
    Case("mbpp data is binary", _data("mbpp", bytes(range(256))), ["data.file"]),
    Case("humaneval data not HumanEval", _jsonl("humaneval", '{"a": 1}'), ["data.jsonl:1"]),
    Case(
        "mbpp tests do not parse",
        _jsonl("mbpp", '{"entry_point": "f", "prompt": "def f(): pass", "test": "def check(:"}'),
        ["data.jsonl:1", "parse"],
    ),
    # numeric flags (caught before connecting: the endpoint here does not exist)
    Case("--max-steps 0", _run("--max-steps", "0"), ["--max-steps"]),
    Case("--max-steps negative", _run("--max-steps", "-2"), ["--max-steps"]),
    Case("--trials 0", _run("--trials", "0"), ["--trials"]),
    Case("--trials negative", _run("--trials", "-1"), ["--trials"]),
    Case("--trials huge", _run("--trials", "1000000"), ["--trials", "1000"]),
    Case("--timeout 0", _run("--timeout", "0"), ["--timeout"]),
    Case("--timeout nan", _run("--timeout", "nan"), ["--timeout"]),
    Case("--max-seconds negative", _run("--max-seconds", "-1"), ["--max-seconds"]),
    Case("--max-seconds inf", _run("--max-seconds", "inf"), ["--max-seconds"]),
    Case("--max-tokens 0", _run("--max-tokens", "0"), ["--max-tokens"]),
    Case("--max-cost negative", _run("--max-cost", "-0.5"), ["--max-cost"]),
    Case("--max-format-errors 0", _run("--max-format-errors", "0"), ["--max-format-errors"]),
    Case("--concurrency 0", _run("--concurrency", "0"), ["--concurrency"]),
    Case("--concurrency huge", _run("--concurrency", "100000"), ["--concurrency"]),
    Case("--validate-after 0", _run("--validate-after", "0"), ["--validate-after"]),
    Case("--refute-after 0", _run("--refute-after", "0"), ["--refute-after"]),
    Case("--lesson-ttl-days 0", _run("--lesson-ttl-days", "0"), ["--lesson-ttl-days"]),
    Case("--lesson-ttl-days huge", _run("--lesson-ttl-days", "1e306"), ["--lesson-ttl-days"]),
    Case("--compress-at 0", _run("--compress-at", "0"), ["--compress-at"]),
    Case("--keep-recent negative", _run("--keep-recent", "-1"), ["--keep-recent"]),
    Case("--summary-cap 0", _run("--summary-cap", "0"), ["--summary-cap"]),
    Case("--context-window 0", _run("--context-window", "0"), ["--context-window"]),
    Case("--temperature negative", _run("--temperature", "-1"), ["--temperature"]),
    Case("--temperatures above 2", _run("--temperatures", "0.1,3"), ["--temperatures"]),
    Case(
        "escalate without a stronger model",
        _bench("--model", "m", "--strategies", "escalate"),
        ["--escalate-to"],
    ),
    Case(
        "escalate with no attempt left for the stronger model",
        _bench("--model", "m", "--strategies", "escalate", "--escalate-to", "big", "--trials", "2"),
        ["--escalate-after 2", "--trials 2"],
    ),
    Case(
        "escalate to the actor's own model",
        _bench("--model", "m", "--strategies", "react,escalate", "--escalate-to", "m"),
        ["--escalate-to m", "the actor's model"],
    ),
    Case("the same arm twice", _bench("--strategies", "retry,retry"), ["--strategies", "twice"]),
    Case(
        "bench of a strategy only solve runs",
        _bench("--model", "m", "--strategies", "react,patch"),
        ["--strategies: strategy 'patch' runs only under `mulligan solve`"],
    ),
    Case(
        "run of a strategy only solve runs",
        _run("--model", "m", "--strategy", "patch[diverse]"),
        ["--strategy: strategy 'patch[diverse]' runs only under `mulligan solve`"],
    ),
    Case(
        "--carried-reflections negative",
        _run("--carried-reflections", "-1"),
        ["--carried-reflections"],
    ),
    Case("--trials not a number", _run("--trials", "three"), ["--trials"]),
    Case("--passes 0", _bench("--passes", "0"), ["--passes"]),
    Case("--k 0", _hash_memory_then(["memory", "search", "units", "--k", "0"]), ["--k"]),
    Case("attempt --max-steps 0", _flags("attempt", "q", "--max-steps", "0"), ["--max-steps"]),
    # names
    Case("bogus --strategy", _run("--strategy", "magic"), ["--strategy", "magic", "reflexion"]),
    Case("bogus --strategies", _bench("--strategies", "react,magic"), ["--strategies", "magic"]),
    Case("empty --strategies", _bench("--strategies", ","), ["--strategies"]),
    Case("bogus --embedding", _run("--embedding", "word2vec"), ["--embedding", "word2vec"]),
    Case("bad hash size", _run("--embedding", "hash:lots"), ["--embedding", "hash:lots"]),
    Case("minilm dir missing", _run("--embedding", "minilm:/no/such/dir"), ["/no/such/dir"]),
    Case("--base-url not a URL", _run("--base-url", "localhost:8080"), ["--base-url", "http://"]),
    Case("--base-url bad brackets", _run("--base-url", "http://[::1"), ["--base-url", "[::1"]),
    Case("--base-url bad port", _run("--base-url", "http://h:99999/v1"), ["--base-url", "99999"]),
    Case(
        "chroma URL with a bad port",
        _flags("memory", "list", "--memory", "http://host:port", "--embedding", "hash"),
        ["--memory", "http://host:port"],
    ),
    Case("run: no minilm model", _minilm_missing("run"), ["model.onnx", "--embedding hash"]),
    Case("bench: no minilm model", _minilm_missing("bench"), ["model.onnx", "--embedding hash"]),
    Case(
        "attempt --workspace a file",
        lambda tmp: ["attempt", "q", "--workspace", str(task_file(tmp, "x", "notes.txt"))],
        ["--workspace", "notes.txt"],
    ),
    Case("attempt unknown tool", _flags("attempt", "q", "--tools", "teleport"), ["teleport"]),
    # mulligan.toml and the environment
    Case("toml syntax", _flags("tasks", "examples"), ["mulligan.toml:2", "'b ='"], "a = 1\nb = \n"),
    Case(
        "toml too deep",
        _flags("tasks", "examples"),
        ["mulligan.toml", "deep"],
        "a = " + "[" * 10**5,
    ),
    Case(
        "toml long number",
        _flags("tasks", "examples"),
        ["mulligan.toml", "digits"],
        "a = " + "1" * 5000,
    ),
    Case(
        "toml unknown key",
        _flags("tasks", "examples"),
        ["mulligan.toml:2", "modle", "model"],
        'model = "m"\nmodle = "x"\n',
    ),
    Case(
        "toml bad value",
        _flags("tasks", "examples"),
        ["mulligan.toml:1", "timeout"],
        'timeout = "soon"\n',
    ),
    Case(
        "toml bad embedding",
        _flags("tasks", "examples"),
        ["mulligan.toml:1", "embedding"],
        'embedding = "glove"\n',
    ),
    Case(
        "toml table", _flags("tasks", "examples"), ["mulligan.toml:1", "endpoints"], "[endpoints]\n"
    ),
    Case(
        "toml not UTF-8",
        _flags("tasks", "examples"),
        ["mulligan.toml", "UTF-8"],
        "model = 'caf\udce9'\n",
    ),
    Case(
        "bad MULLIGAN_TIMEOUT",
        _flags("tasks", "examples"),
        ["MULLIGAN_TIMEOUT"],
        env={"MULLIGAN_TIMEOUT": "soon"},
    ),
    # memory
    Case("memory path is a file", _memory_is_a_file, ["mem", "--memory"]),
    Case("memory path cannot be created", _memory_under_a_file, ["file", "--memory"]),
    Case(
        "memory directory on a filesystem that makes none",
        _flags("memory", "list", "--memory", "/proc/nope", "--embedding", "hash"),
        ["/proc/nope", "--memory"],
    ),
    Case(
        "memory directory on /proc for a run",
        _flags("episodes", "list", "--memory", "/proc/nope/mem"),
        ["/proc/nope/mem", "--memory"],
    ),
    Case("corrupt episodes.db", _corrupt_episode_log, ["episodes.db"]),
    Case("truncated episodes.db", _truncated_episode_log, ["episodes.db"]),
    Case("corrupt chroma files", _corrupt_chroma, ["chroma"]),
    Case("someone else's episodes.db", _foreign_database("episodes.db"), ["episodes.db"]),
    Case(
        "someone else's chroma.sqlite3",
        _foreign_database("lessons/chroma/chroma.sqlite3"),
        ["chroma.sqlite3"],
    ),
    Case("lessons is a file", _lessons_is_a_file, ["lessons", "--memory"]),
    Case("the store's chroma is a file", _chroma_is_a_file, ["lessons/chroma", "--memory"]),
    Case("the store's lock is a directory", _lock_is_a_directory, ["lessons.lock", "--memory"]),
    Case("store built with another embedding", _other_embedding, ["hash-512", "--embedding"]),
    Case("import garbage", _import(b"\x00\x01garbage\xff\n"), ["in.jsonl"]),
    Case("import half garbage", _import(GOOD_LESSON + b"\n{oops\n"), ["in.jsonl:2"]),
    Case("import wrong records", _import(b'{"text": 3}\n'), ["in.jsonl:1"]),
    Case("import a directory", _import_a_directory, ["in.jsonl"]),
    Case("export into a directory", _export_to_a_directory, ["out"]),
    Case("report: unknown run", _report_unknown_run, ["nosuchrun"]),
    Case("report: corrupt episodes.db", _report_corrupt_log, ["episodes.db"]),
    # output directories
    Case("bench --out is a file", _out_is_a_file("bench"), ["--out", "out"]),
    Case("report --out is a file", _out_is_a_file("report"), ["--out", "out"]),
    Case("demo --out is a file", _out_is_a_file("demo"), ["--out", "out"]),
]


def content_hash(path: Path) -> str:
    """Bytes, or for an SQLite database its rows (with its write-ahead log, read-only)."""
    data = path.read_bytes()
    if data.startswith(b"SQLite format 3\x00"):
        try:
            connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                data = "\n".join(connection.iterdump()).encode()
            finally:
                connection.close()
        except sqlite3.Error:
            pass
    return hashlib.sha256(data).hexdigest()


def tree_hashes(root: Path) -> dict[str, str]:
    """Every file under the case's directory (the user's files), by content.

    SQLite's -wal and -shm files are part of their database's content, not files of their own.
    """
    return {
        str(path.relative_to(root)): content_hash(path)
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.name.endswith(("-wal", "-shm", "mulligan.toml"))
    }


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_clear_line_exit_2_and_changes_nothing(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    if case.config is not None:
        (work / "mulligan.toml").write_bytes(case.config.encode("utf-8", "surrogateescape"))
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    argv = case.setup(tmp_path)
    capsys.readouterr()
    before = tree_hashes(tmp_path)
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own errors
        status = exc.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert status == 2, (status, err)
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert 1 <= len(lines) <= 2, err
    assert lines[0].startswith("mulligan"), err
    for word in case.says:
        assert word in err, (word, err)
    assert tree_hashes(tmp_path) == before, "the user's files changed"


def test_real_processes_show_no_traceback(tmp_path: Path) -> None:
    """The console path (`python -m mulligan.cli`), three bad inputs at once."""
    (tmp_path / "bin.yaml").write_bytes(bytes(range(256)))
    (tmp_path / "mem").mkdir()
    (tmp_path / "mem" / "episodes.db").write_bytes(b"garbage" * 100)
    commands = [
        ["tasks", str(tmp_path / "bin.yaml")],
        ["run", "examples", "--trials", "0"],
        ["episodes", "list", "--memory", str(tmp_path / "mem")],
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "mulligan.cli", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=env,
        )
        for argv in commands
    ]
    for argv, process in zip(commands, processes, strict=True):
        out, err = process.communicate(timeout=120)
        assert process.returncode == 2, (argv, err)
        assert "Traceback" not in out + err
        assert len(err.strip().splitlines()) == 1, err


def test_good_inputs_still_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The checks reject only what is wrong: a good task file and a good import still work."""
    assert main(["tasks", str(task_file(tmp_path, GOOD_TASK))]) == 0
    directory = a_memory(tmp_path)
    (tmp_path / "in.jsonl").write_bytes(GOOD_LESSON + b"\n\n")
    argv = ["memory", "import", str(tmp_path / "in.jsonl"), "--embedding", "hash"]
    assert main([*argv, "--memory", str(directory)]) == 0
    assert "imported 1" in capsys.readouterr().out
    assert json.loads(GOOD_LESSON)["id"] in {
        lesson.id for lesson in Memory(directory, HashEmbedding()).store.all()
    }


def test_every_numeric_flag_has_a_bound() -> None:
    """A numeric flag added later without a bound would let 0 or -1 through again."""
    import argparse

    from mulligan.cli import build_parser
    from mulligan.settings.fields import bounded_flags

    unbounded = set()
    parsers = [build_parser()]
    while parsers:
        parser = parsers.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers += list(action.choices.values())
            elif action.type in (int, float) and action.dest not in {"seed", *bounded_flags()}:
                unbounded.add(action.dest)
    assert not unbounded, f"give these fields bounds (ge/le...): {sorted(unbounded)}"
