"""The command line in the ecosystem's style: defaults in every --help, global flags anywhere,
--version, coloured PASS/FAIL, tables on a terminal and progress bars that log lines never
break."""

from __future__ import annotations

import argparse
import io
import json
import logging
import re
from pathlib import Path

import pytest

from mulligan.cli import build_parser, help_format, main, output
from mulligan.cli.progress import Progress
from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import Lesson, LessonScope

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def a_memory(directory: Path) -> None:
    memory = Memory(directory, HashEmbedding())
    lesson = Lesson(id="l1", text="Convert units before comparing.", scope=LessonScope(family="u"))
    memory.keep(lesson, persistent=True)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert re.fullmatch(r"mulligan \S+\n", capsys.readouterr().out)


def test_global_flags_are_accepted_before_or_after_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_memory(tmp_path / "m")
    where = ["--memory", str(tmp_path / "m"), "--embedding", "hash"]
    for argv in (
        ["--json", "-v", "memory", "list", *where],
        ["memory", "list", *where, "--json", "-v"],
        ["-v", "memory", "--json", "list", *where],
    ):
        assert main(argv) == 0, argv
        assert json.loads(capsys.readouterr().out)["id"] == "l1"
    parser = build_parser()
    for name, command in help_format.commands_of(parser).items():
        flags = {s for a in command._actions for s in a.option_strings}
        assert "-v" in flags, name
        assert ("--json" in flags) == (name in help_format.JSON_COMMANDS), name


def test_json_on_a_command_without_json_output_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--json", "demo", "--out", "/nonexistent/never"]) == 2
    assert "`mulligan demo` has no JSON output" in capsys.readouterr().err


def test_every_help_shows_the_defaults() -> None:
    parser = build_parser()
    for name, command in help_format.commands_of(parser).items():
        text = " ".join(command.format_help().split())
        for action in command._actions:
            if action.option_strings and action.default not in (
                None, False, argparse.SUPPRESS, [],
            ):  # fmt: skip
                assert f"(default: {action.default})" in text, (name, action.dest)
    assert "(default: react)" in " ".join(
        help_format.commands_of(parser)["run"].format_help().split()
    )


def test_listings_have_json_and_plain_lines_when_piped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tasks", "examples", "--limit", "2", "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(records) == 2 and all("prompt" in r and "checks" in r for r in records)
    assert main(["tasks", "examples", "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all("\ttools: " in line for line in lines)


def test_memory_show_is_text_or_json_never_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_memory(tmp_path / "m")
    where = ["--memory", str(tmp_path / "m")]
    assert main(["memory", "show", "l1", *where, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["lesson"]["id"] == "l1" and isinstance(shown["events"], list)
    assert main(["memory", "show", "l1", *where]) == 0
    text = capsys.readouterr().out
    assert text.startswith("l1  failure  candidate") and "{" not in text


def test_tables_on_a_terminal() -> None:
    screen = Terminal()
    output.table(["id", "status"], [["l1", "validated"]], ["l1 validated"], screen)
    drawn = ANSI.sub("", screen.getvalue())
    assert "┃ id" in drawn and "│ l1" in drawn and "validated" in drawn
    piped = io.StringIO()
    output.table(["id", "status"], [["l1", "validated"]], ["l1 validated"], piped)
    assert piped.getvalue() == "l1 validated\n"


def test_pass_and_fail_are_coloured_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert output.marked("PASS t1", Terminal()) == "\x1b[32mPASS\x1b[0m t1"
    assert output.marked("FAIL t1", Terminal()) == "\x1b[31mFAIL\x1b[0m t1"
    assert output.marked("PASS t1", io.StringIO()) == "PASS t1"
    monkeypatch.setenv("NO_COLOR", "1")
    assert output.marked("PASS t1", Terminal()) == "PASS t1"


def test_plain_progress_lines_with_a_warning_between_them() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("mulligan")
    logger.addHandler(handler)
    try:
        progress = Progress(total=3, stream=out, live=False)
        with progress.shown():
            progress.advance("reflexion", True, 1200, 0.01)
            logger.warning("the endpoint is slow")
            progress.advance("reflexion", False, 800, None)
    finally:
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert re.fullmatch(
        r"reflexion +1/3 tasks · 1 passed · 1,200 tokens · \$0\.0100 · \d+s elapsed · ETA \d+s",
        lines[0],
    )
    assert lines[1] == "WARNING mulligan: the endpoint is slow"
    assert lines[2].startswith("reflexion              2/3 tasks · 1 passed · 2,000 tokens")
    assert "cost unknown" in lines[2]


@pytest.mark.parametrize("cost", [0.0, None])  # the local model; an endpoint nobody priced
def test_progress_lines_leave_the_cost_out_where_nothing_is_priced(cost: float | None) -> None:
    out = io.StringIO()
    with Progress(total=2, stream=out, live=False).shown() as progress:
        progress.advance("retry", True, 1200, cost)
        progress.advance("retry", False, 800, cost)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and not any("$" in line or "cost" in line for line in lines)
    assert re.fullmatch(r"retry +2/2 tasks · 1 passed · 2,000 tokens · \d+s elapsed · ETA \d+s",
                        lines[1])  # fmt: skip
    screen = Terminal()
    with Progress(total=2, stream=screen, live=True, width=160).shown() as bars:
        bars.advance("retry", True, 1200, cost)
    assert "$" not in screen.getvalue() and "1,200 tokens ·" in screen.getvalue()


def test_live_bars_show_a_warning_on_a_line_of_its_own() -> None:
    screen = Terminal()
    handler = logging.StreamHandler(screen)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("mulligan")
    logger.addHandler(handler)
    try:
        progress = Progress(total=4, stream=screen, live=True, width=160)
        with progress.shown():
            progress.advance("react", True, 100, 0.0)
            logger.warning("the endpoint is slow")
            progress.advance("react", True, 100, 0.0)
    finally:
        logger.removeHandler(handler)
    assert handler.stream is screen  # given back after the bars
    lines = [
        line.rstrip() for line in ANSI.sub("", screen.getvalue()).replace("\r", "\n").split("\n")
    ]
    assert "WARNING mulligan: the endpoint is slow" in lines
    final = [line for line in lines if "2/4" in line]
    assert final and "2 passed" in final[-1] and "200 tokens" in final[-1] and "ETA" in final[-1]


def test_demo_progress_is_plain_lines_per_task_when_piped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--out", str(tmp_path / "d")]) == 0
    err = capsys.readouterr().err
    progress = [line for line in err.splitlines() if " tasks · " in line]
    assert any("react" in line and " 1/10 tasks" in line for line in progress)
    assert any("reflexion-memory" in line and " 10/10 tasks" in line for line in progress)
    assert all("elapsed · ETA" in line for line in progress)
    assert "\r" not in err
