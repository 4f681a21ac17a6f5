"""Where the project lies, and what it is called, against mulligan's own places and names:
a temporary directory inside it (where the attempts' copies are made), a name the lesson
store's collection names could not hold."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from mulligan.solve.copies import Project
from tests.helpers.solving import FIX, scripted, solve
from tests.solve.test_solve import FIXED, make_project


@pytest.mark.parametrize("name", ["release-1..2", "..."])
def test_a_dir_whose_name_has_dots_in_a_row_is_solved(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The project's lessons are kept under its directory's name (the family), which the
    lesson store's collection names may not hold as `..`."""
    project = make_project(tmp_path / name)
    code, _ = solve(tmp_path, project, scripted([FIX]), "--apply")
    assert code == 0, capsys.readouterr().err
    assert (project / "calc.py").read_text() == FIXED


def test_a_temporary_directory_inside_the_project_is_not_part_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TMPDIR=$PROJECT/tmp: the attempts' copies are made there, so one attempt's copy
    would be copied into the next one made meanwhile, and read as the user's change to the
    project (--apply refused: "changed since attempt 2 began")."""
    project = make_project(tmp_path / "calc")
    (project / "tmp" / "mulligan-copy-1234").mkdir(parents=True)
    (project / "tmp" / "mulligan-copy-1234" / "calc.py").write_text(FIXED)
    (project / "tmpfiles").mkdir()
    (project / "tmpfiles" / "kept.txt").write_text("the project's\n")
    monkeypatch.setenv("TMPDIR", str(project / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert Project(project).files() == ["calc.py", "test_calc.py", "tmpfiles/kept.txt"]
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # a temporary directory holding the project
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert "calc.py" in Project(project).files()
