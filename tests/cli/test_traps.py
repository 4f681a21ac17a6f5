"""The small traps a new user fell into: each is now a clear message or just works."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from mulligan.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


def test_the_reports_rebuild_hint_works_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    hint = re.search(r"Generated at [^`]* by `([^`]+)`", (out / "report.md").read_text())
    assert hint is not None
    argv = shlex.split(hint.group(1))
    assert argv[:2] == ["mulligan", "report"]
    (out / "report.md").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the hint must not depend on where it is run
    capsys.readouterr()
    assert main(argv[1:]) == 0, capsys.readouterr().err
    assert (out / "report.md").exists()


def test_a_second_bench_never_overwrites_the_first_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "study"
    out.mkdir()
    (out / "report.md").write_text("# mulligan study 0123abcd\n\nthe first study")
    status = main(["bench", "examples", "--out", str(out), "--base-url", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert status == 2
    assert "already holds a report" in err and "--resume 0123abcd" in err
    assert err.count("\n") == 1
    assert (out / "report.md").read_text() == "# mulligan study 0123abcd\n\nthe first study"


def test_gitignore_lists_the_folders_mulligan_writes() -> None:
    ignored = (ROOT / ".gitignore").read_text().split()
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    outs = {a.default for c in ("bench", "demo") for a in commands[c]._actions if a.dest == "out"}
    assert outs == {"mulligan-bench", "mulligan-demo"}
    for folder in outs:
        assert f"{folder}/" in ignored


def test_the_screenshot_script_says_chromium_is_missing(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text("<html></html>")
    done = subprocess.run(
        ["/bin/bash", str(ROOT / "scripts" / "screenshot_report.sh"), str(page)],
        capture_output=True,
        text=True,
        env={"PATH": str(tmp_path)},  # no chromium on this PATH
        timeout=30,
    )
    assert done.returncode == 127
    assert "needs Chromium" in done.stderr and "apt-get install chromium" in done.stderr
