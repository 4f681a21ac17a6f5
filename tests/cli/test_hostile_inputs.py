"""A hostile user's inputs beyond tests/cli/test_bad_inputs.py: each asserts what a demanding user
expects (one clear line naming the place, exit 2, nothing of theirs lost or overwritten)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import Lesson, LessonScope
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.helpers.bad_inputs import a_memory

CHECK = "checks: [{type: contains, text: x}]\n"


@pytest.fixture(autouse=True)
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("MULLIGAN_") and name not in ("MULLIGAN_CONFIG", "MULLIGAN_LOCAL"):
            monkeypatch.delenv(name)
    return tmp_path


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[Any, str, str]:
    capsys.readouterr()
    try:
        status: Any = main(argv)
    except SystemExit as exc:
        status = exc.code
    except Exception as exc:  # a bug: the user would see a traceback
        status = f"raised {type(exc).__name__}: {exc}"
    out, err = capsys.readouterr()
    return status, out, err


def refused(result: tuple[Any, str, str], *says: str, lines: int = 1) -> None:
    """Exit 2, no traceback, at most `lines` lines on stderr, naming each of `says`."""
    status, out, err = result
    assert status == 2, (status, err[-600:])
    assert "Traceback" not in out + err
    assert 1 <= len(err.strip().splitlines()) <= lines, err
    for word in says:
        assert word in err, (word, err)


# ------------------------------------------------------------------ mulligan.toml, MULLIGAN_*

TOML_CASES = {
    "dotted key, negative budget": ("budget.max_steps = -1\n", ["mulligan.toml:1", "max_steps"]),
    "inline table, negative budget": ("budget = {max_steps = -1}\n", ["mulligan.toml:1"]),
    "sub-table of a section": ("[budget.extra]\nx = 1\n", ["mulligan.toml:1", "extra"]),
    "negative observation_max_chars": (
        "[compression]\nobservation_max_chars = -1\n",
        ["mulligan.toml:2", "observation_max_chars"],
    ),
    "negative fold_to": ("[compression]\nfold_to = -3\n", ["mulligan.toml:2", "fold_to"]),
    "threshold_fraction 9": (
        "[compression]\nthreshold_fraction = 9\n",
        ["mulligan.toml:2", "threshold_fraction"],
    ),
    "trials = true": ("[loop]\ntrials = true\n", ["mulligan.toml:2", "trials"]),
    "max_steps = false": ("[budget]\nmax_steps = false\n", ["mulligan.toml:2", "max_steps"]),
    "one setting twice": ('model = "a"\n[endpoint]\nmodel = "b"\n', [":1", ":3", "model"]),
    "duplicate key": (
        "[budget]\nmax_steps = 3\nmax_steps = 4\n",
        ["mulligan.toml:3", "'max_steps = 4'", "each key and [table] once"],
    ),
    "bad stop (held)": ('[loop]\nstop = "oracle "\n', ["mulligan.toml:2", "stop"]),
}


@pytest.mark.parametrize("name", TOML_CASES)
def test_a_bad_mulligan_toml_names_its_line(
    name: str, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, says = TOML_CASES[name]
    (here / "mulligan.toml").write_text(text)
    refused(cli(["tasks", "examples"], capsys), *says)


def test_a_setting_that_is_a_table_may_be_written_as_one(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`[endpoint.prices]` is the table `endpoint.prices`, not an unknown key."""
    (here / "mulligan.toml").write_text("[endpoint.prices]\nm = {input = 1, output = 2}\n")
    status, out, err = cli(["config", "show"], capsys)
    assert status == 0 and "endpoint.prices" in out, err


def test_a_section_given_as_a_value_says_it_must_be_a_table(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "mulligan.toml").write_text("budget = 3\n")
    result = cli(["tasks", "examples"], capsys)
    refused(result, "mulligan.toml:1", "table")
    assert "unknown key 'budget'" not in result[2]  # [budget] is a known section


@pytest.mark.parametrize(
    "name,value", [("MULLIGAN_MAX_STEPS", "-1"), ("MULLIGAN_TRIALS", "abc"),
                   ("MULLIGAN_COMPRESSION", "maybe"), ("MULLIGAN_CONCURRENCY", "1e9")],
)  # fmt: skip
def test_a_bad_variable_is_named(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(name, value)
    refused(cli(["tasks", "examples"], capsys), name)


def test_a_settings_file_named_by_mulligan_config_that_is_missing_is_an_error(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MULLIGAN_CONFIG", str(here / "my-config.toml"))
    refused(cli(["tasks", "examples"], capsys), "my-config.toml", "MULLIGAN_CONFIG")


# ------------------------------------------------------------------ task files

TASK_CASES = {
    "duplicate key in YAML": ("t.yaml", f"id: a\nprompt: one\nprompt: two\n{CHECK}", ["t.yaml:3", "prompt"]),
    "duplicate key in JSON": (
        "t.json", '{"id": "a", "prompt": "one",\n "prompt": "two", "checks": [{"type": "contains", "text": "x"}]}',
        ["t.json:2", "prompt"],
    ),
    "empty id": ("t.yaml", f'id: ""\nprompt: p\n{CHECK}', ["t.yaml:1", "id"]),
    "id with a newline": ("t.yaml", f'id: "a\\nb"\nprompt: p\n{CHECK}', ["t.yaml:1", "id"]),
    "empty prompt": ("t.yaml", f'id: a\nprompt: ""\n{CHECK}', ["t.yaml:2", "prompt"]),
    "contains '' always passes": (
        "t.yaml", 'id: a\nprompt: p\nchecks: [{type: contains, text: ""}]\n', ["t.yaml:3", "text"],
    ),
    "max_steps: true": (
        "t.yaml", f"id: a\nprompt: p\nbudget: {{max_steps: true}}\n{CHECK}", ["t.yaml:3", "max_steps"],
    ),
    "command timeout 1e308": (
        "t.yaml", 'id: a\nprompt: p\nworkspace: {n.txt: hi}\nchecks:\n'
        '  - {type: command, command: "true", timeout: 1e308}\n', ["t.yaml:5", "timeout"],
    ),
    "NUL in a workspace path": (
        "t.yaml", f'id: a\nprompt: p\nworkspace: {{"a\\0b": x}}\n{CHECK}', ["t.yaml:3", "workspace"],
    ),
    "workspace file is also a folder": (
        "t.yaml", f'id: a\nprompt: p\nworkspace: {{"a": x, "a/b": y}}\n{CHECK}', ["t.yaml", "a/b"],
    ),
    "file check outside the workspace": (
        "t.yaml", "id: a\nprompt: p\nchecks:\n  - {type: file, path: ../out.txt}\n",
        ["t.yaml:4", "checks.0.path", "outside the workspace"],
    ),
    "file check at an absolute path": (
        "t.yaml", "id: a\nprompt: p\nchecks:\n  - {type: file, path: /tmp/out.txt}\n",
        ["t.yaml:4", "checks.0.path", "relative"],
    ),
    "python_tests file outside the workspace": (
        "t.yaml", "id: a\nprompt: p\nchecks:\n  - {type: python_tests, tests: 'assert 1',\n"
        "     file: /src/calc.py}\n", ["t.yaml:5", "checks.0.file", "relative"],
    ),
    "'..' in a file check's path": (
        "t.yaml", "id: a\nprompt: p\nchecks:\n  - {type: file, path: a/../b.txt}\n",
        ["t.yaml:4", "checks.0.path", "'b.txt'"],
    ),
    "NUL in a file check's path": (
        "t.yaml", 'id: a\nprompt: p\nchecks: [{type: file, path: "a\\0b"}]\n',
        ["t.yaml:3", "checks.0.path"],
    ),
    "scalar file (held)": ("t.yaml", "hello\n", ["t.yaml", "mapping"]),
    "unknown check type (held)": (
        "t.yaml", "id: a\nprompt: p\nchecks: [{type: telepathy}]\n", ["t.yaml:3", "telepathy"],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", TASK_CASES)
def test_tasks_refuses_a_task_that_run_cannot_use(
    name: str, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filename, body, says = TASK_CASES[name]
    (here / filename).write_text(body)
    refused(cli(["tasks", str(here / filename)], capsys), *says, lines=3)


@pytest.mark.parametrize("name", ["NUL in a workspace path", "workspace file is also a folder",
                                  "unknown check type (held)"])  # fmt: skip
def test_run_stops_on_a_bad_task_file_before_asking_the_model(
    name: str, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filename, body, says = TASK_CASES[name]
    (here / filename).write_text(body)
    with FakeOpenAIServer(policy=lambda body: FakeReply(content="x")) as server:
        argv = ["run", str(here / filename), "--base-url", server.base_url]
        result = cli([*argv, "--memory", str(here / "mem"), "--embedding", "hash"], capsys)
    refused(result, *says, lines=3)
    assert server.requests == [], "the model was asked before the task file was refused"


@pytest.mark.parametrize("prefix,body", [
    ("tab-indented (json.dumps(indent='\\t'))", '{\n\t"id": "a",\n\t"prompt": "p",\n\t"checks": '
     '[{"type": "contains", "text": "x"}]\n}\n'),
    ("UTF-8 BOM (Notepad)", '\ufeff{"id": "a", "prompt": "p", "checks": [{"type": "contains", '
     '"text": "x"}]}\n'),
])  # fmt: skip
def test_valid_json_task_files_load(
    prefix: str, body: str, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "t.json").write_text(body, encoding="utf-8")
    status, _, err = cli(["tasks", str(here / "t.json")], capsys)
    assert status == 0, err


# ------------------------------------------------------------------ memory


def lesson(lesson_id: str, text: str = "Read the question twice.", **validity: int) -> str:
    record = json.loads(Lesson(id=lesson_id, text=text).model_dump_json())
    record["validity"].update(validity)
    return json.dumps(record)


def stored(directory: Path) -> dict[str, str]:
    memory = Memory(directory, HashEmbedding())
    return {item.id: item.text for item in memory.store.all()}


def import_(directory: Path, path: Path, *flags: str) -> list[str]:
    return [
        "memory",
        "import",
        str(path),
        *flags,
        "--memory",
        str(directory),
        "--embedding",
        "hash",
    ]


def test_import_bad_line_3_names_it_and_imports_nothing(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = a_memory(here)
    (here / "in.jsonl").write_text(f'{lesson("a")}\n{lesson("b")}\n{{"id": "c", oops\n')
    refused(cli(import_(directory, here / "in.jsonl"), capsys), "in.jsonl:3")
    assert set(stored(directory)) == {"l1"}


@pytest.mark.parametrize("name,lines,says", [
    ("one id twice in the file", [lesson("d", "A"), lesson("d", "B")], ["in.jsonl:2", "'d'"]),
    ("empty id", ['{"id": "", "text": "t"}'], ["in.jsonl:1", "id"]),
    ("negative counters kept by --trust", [lesson("n", helped=-5)], ["in.jsonl:1", "helped"]),
])  # fmt: skip
def test_import_refuses_records_the_store_cannot_hold(
    name: str, lines: list[str], says: list[str], here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = a_memory(here)
    (here / "in.jsonl").write_text("\n".join(lines) + "\n")
    refused(cli(import_(directory, here / "in.jsonl", "--trust"), capsys), *says)
    assert set(stored(directory)) == {"l1"}


def test_import_does_not_silently_replace_a_lesson_already_stored(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = a_memory(here)  # l1: "Check the units first.", family demo
    (here / "in.jsonl").write_text(lesson("l1", "Overwritten from elsewhere.") + "\n")
    status, _, err = cli(import_(directory, here / "in.jsonl"), capsys)
    lessons = Memory(directory, HashEmbedding()).store.all()
    assert [(x.id, x.text, x.scope.family) for x in lessons] == [
        ("l1", "Check the units first.", "demo")
    ], (status, err)


def test_an_export_imports_again_whatever_its_text(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = Memory(here / "mem", HashEmbedding())
    text = "Split on commas\u2028then strip\x85each part."  # separators JSON need not escape
    memory.keep(Lesson(id="sep", text=text, scope=LessonScope(family="f")), persistent=True)
    memory.log.db.conn.close()
    assert (
        cli(["memory", "export", "--out", "x.jsonl", "--memory", str(here / "mem")], capsys)[0] == 0
    )
    status, _, err = cli(import_(here / "other", here / "x.jsonl"), capsys)
    assert status == 0, err
    assert stored(here / "other") == {"sep": text}


def test_export_does_not_overwrite_the_users_file(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = a_memory(here)
    (here / "notes.jsonl").write_text("my own notes\n")
    status, _, err = cli(
        ["memory", "export", "--out", "notes.jsonl", "--memory", str(directory)], capsys
    )
    assert (here / "notes.jsonl").read_text() == "my own notes\n", (status, err)


def test_reading_a_memory_that_is_not_there_creates_nothing(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refused(cli(["memory", "list", "--memory", str(here / "mem-typo")], capsys), "mem-typo")
    assert not (here / "mem-typo").exists()


def test_episodes_show_of_an_unknown_id_is_one_line(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = a_memory(here)
    refused(cli(["episodes", "show", "nope", "--memory", str(directory)], capsys), "'nope'")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_memory_is_refused_before_work(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = a_memory(here)
    (here / "in.jsonl").write_text(lesson("a") + "\n")
    for path in [directory, *directory.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        refused(cli(import_(directory, here / "in.jsonl"), capsys), str(directory))
    finally:
        for path in [directory, *directory.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)


# ------------------------------------------------------------------ output directories

MINE = {"report.md": "# my notes\n", "report.html": "<p>mine</p>", "outcomes.jsonl": "{}\n"}


def users_directory(path: Path, names: tuple[str, ...]) -> Path:
    path.mkdir()
    for name in names:
        (path / name).write_text(MINE[name])
    return path


def kept(path: Path, names: tuple[str, ...], result: tuple[Any, str, str]) -> None:
    changed = [n for n in names if (path / n).read_text() != MINE[n]]
    assert not changed, f"overwritten without a word: {changed} (status {result[0]})"


def test_demo_does_not_overwrite_the_users_report(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = users_directory(here / "out", ("report.md",))
    kept(out, ("report.md",), cli(["demo", "--out", str(out)], capsys))


def test_report_does_not_overwrite_the_users_report(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(["demo", "--out", str(here / "study")], capsys)[0] == 0
    run_id = Memory(here / "study" / "memory").log.runs()[-1]["id"]
    out = users_directory(here / "mine", ("report.md",))
    argv = ["report", run_id, "--out", str(out), "--memory", str(here / "study" / "memory")]
    kept(out, ("report.md",), cli(argv, capsys))


def test_bench_does_not_overwrite_the_users_files(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "t.yaml").write_text("id: four\nprompt: 2 + 2?\nchecks: [{type: numeric, value: 4}]\n")
    names = ("report.html", "outcomes.jsonl")  # no report.md: the one file bench looks for
    out = users_directory(here / "out", names)
    with FakeOpenAIServer(policy=lambda body: FakeReply(content="4")) as server:
        argv = ["bench", str(here / "t.yaml"), "--strategies", "react", "--out", str(out)]
        result = cli([*argv, "--base-url", server.base_url, "--embedding", "hash"], capsys)
    kept(out, names, result)


def test_a_command_check_on_a_task_without_a_workspace_runs_in_an_empty_one(here: Path) -> None:
    """It used to fail as "cannot run: the task has no workspace", charged to the model."""
    from mulligan.loop import LoopSettings
    from mulligan.runs.build import build_loop
    from mulligan.schema import CommandCheck, Task
    from mulligan.testing import ScriptedModel

    task = Task(id="a", prompt="p", checks=[CommandCheck(command='test -z "$(ls -A)"')])
    verdict = build_loop(
        ScriptedModel(["done"]), LoopSettings(strategy="react", trials=1)
    ).run_episode(task)
    assert verdict.verdicts[0].passed, verdict.verdicts[0].checks[0].detail


def test_an_import_with_json_python_cannot_read_is_one_line(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 5,000-digit number is JSON, but not one Python reads into an int."""
    (here / "big.jsonl").write_text('{"id": "a", "text": "x", "n": ' + "1" * 5000 + "}\n")
    refused(cli(import_(a_memory(here), here / "big.jsonl"), capsys), "big.jsonl:1")
