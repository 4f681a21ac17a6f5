"""A demanding user attacks `mulligan solve` on a git repository: repositories inside it (a
submodule, a cloned dependency), and work the user has not committed. The copy holds what the
working tree holds; nothing of the user's is lost. The model is scripted (FakeOpenAIServer).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mulligan.solve.copies import Project
from tests.helpers.solving import FIX, files_of, passes_in, scripted, solve
from tests.solve.test_solve import FIXED, make_project

USES_HELPER = (
    "import sys\nsys.path.insert(0, 'vendor/helper')\nimport helper\nfrom calc import add\n"
    "assert add(2, 3) == 5, f'add(2, 3) = {add(2, 3)}'\nprint(helper.ANSWER)\n"
)


def git(root: Path, *argv: str) -> None:
    identity = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always"]
    subprocess.run(["git", *identity, *argv], cwd=root, check=True, capture_output=True)


def helper_repository(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "helper.py").write_text("ANSWER = 42\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "helper")
    return root


@pytest.mark.parametrize("how", ["cloned inside", "submodule"])
def test_a_repository_inside_the_project_is_in_the_copy(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dependency cloned into vendor/ (git lists it as one untracked directory) or added as
    a submodule (a gitlink): the checks need its files in the copy as they are in DIR."""
    project = make_project(tmp_path / "calc", git=True)
    if how == "submodule":
        source = helper_repository(tmp_path / "helper")
        git(project, "submodule", "add", "-q", str(source), "vendor/helper")
        git(project, "commit", "-qm", "helper")
    else:
        helper_repository(project / "vendor" / "helper")
    (project / "test_calc.py").write_text(USES_HELPER)
    vendored = {k: v for k, v in files_of(project).items() if k.startswith("vendor/")}
    code, _ = solve(tmp_path, project, scripted([FIX]), "--apply")
    captured = capsys.readouterr()
    assert code == 0, captured.err[-800:]
    assert captured.out.count("diff --git") == 1 and "a/calc.py" in captured.out
    assert (project / "calc.py").read_text() == FIXED
    assert {k: v for k, v in files_of(project).items() if k.startswith("vendor/")} == vendored
    assert passes_in(project)


def test_a_submodule_not_checked_out_is_an_empty_directory_in_the_copy(tmp_path: Path) -> None:
    source = helper_repository(tmp_path / "helper")
    upstream = make_project(tmp_path / "upstream", git=True)
    git(upstream, "submodule", "add", "-q", str(source), "vendor/helper")
    git(upstream, "commit", "-qm", "helper")
    git(tmp_path, "clone", "-q", str(upstream), "calc")  # without --recurse-submodules
    project = Project(tmp_path / "calc")
    assert project.files() == [".gitignore", ".gitmodules", "calc.py", "test_calc.py"]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the repository to another user needs root")
def test_a_repository_git_will_not_read_for_its_owner_is_copied_whole_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`sudo mulligan solve`, or root in a container on a mounted repository: git refuses a
    repository another user owns, so its .gitignore cannot be read; the copies hold the
    whole directory, and solve says why and how to let git read it."""
    project = make_project(tmp_path / "calc", git=True)  # its .gitignore ignores build/
    (project / "build").mkdir()
    (project / "build" / "out.o").write_text("x")
    subprocess.run(["chown", "-R", "4321:4321", str(project)], check=True)
    with caplog.at_level("WARNING", logger="mulligan"):
        files = Project(project).files()
    assert "build/out.o" in files
    (warned,) = [r.getMessage() for r in caplog.records if "safe.directory" in r.getMessage()]
    assert str(project) in warned and ".gitignore" in warned
