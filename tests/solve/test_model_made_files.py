"""What a model makes in its copy that a diff cannot carry (a file whose name is not
printable UTF-8) is left out of the diff and named, never a crash of `solve` or a line of the
diff a name wrote."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.solving import FIX, passes_in, scripted, solve
from tests.solve.test_solve import FIXED, call, make_project

ODD_NAMES = "printf x > \"$(printf 'caf\\351.txt')\"; printf x > \"$(printf 'a\\nb.txt')\""
"""A latin-1 name, and a name with a newline in it (which would be a line of the diff)."""


def test_files_a_model_names_in_no_utf8_are_left_out_of_the_diff_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    project = make_project(tmp_path / "calc")
    policy = scripted([FIX, call("shell", command=ODD_NAMES)])
    with caplog.at_level("WARNING", logger="mulligan"):
        code, _ = solve(tmp_path, project, policy, "--apply")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.count("diff --git") == 1 and "a/calc.py" in captured.out
    (warned,) = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert "caf\\xe9.txt" in warned and "a\\nb.txt" in warned
    assert sorted(os.listdir(project)) == ["calc.py", "test_calc.py"]
    assert (project / "calc.py").read_text() == FIXED and passes_in(project)
