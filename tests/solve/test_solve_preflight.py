"""`solve` runs every check once on the untouched project before attempt 1."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.errors import UserError
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.solve.test_solve import BUGGY, CHECK, FIXED, make_project, solve_args, solver

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
"""pytest, which a model could only 'fix' here by writing tests that pass."""


def no_model_call(body: dict[str, Any]) -> FakeReply:
    raise AssertionError("the model was called before the checks were known to run")


def solve_with(
    project: Path, tmp_path: Path, *extra: str, check: str | None = None
) -> tuple[int, FakeOpenAIServer]:
    """`solve` on the project against a model that must not be called; `check` in place of
    the project's one check."""
    with FakeOpenAIServer(policy=no_model_call) as server:
        argv = solve_args(server, project, tmp_path / "mem", *extra)
        code = main([check if check is not None and a == CHECK else a for a in argv])
    return code, server


def refused_in_one_line(
    code: int, server: FakeOpenAIServer, capsys: pytest.CaptureFixture[str], check: str
) -> str:
    """solve stopped before any model call, exit 2, with one line naming `check`: that line."""
    captured = capsys.readouterr()
    assert code == 2 and server.requests == []
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert f'--check "{check}"' in lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("check", "said", "fix"),
    [
        (
            "no-such-program-xyz --run",
            "no-such-program-xyz",
            "(exit 127); no-such-program-xyz is not installed or not on the PATH",
        ),
        ("./run_tests.sh", "./run_tests.sh: Permission denied (exit 126)", "chmod +x"),
        ("./missing.sh", "(exit 127)", "./missing.sh is not in the project"),
        ("python3 -m no_such_runner_xyz", "No module named no_such_runner_xyz", "install"),
        ("sleep 60", "timed out after", "--check-timeout (now 3s)"),
        ("python3 test_calc.py'", "(exit 2)", "the shell cannot read the command"),
        ("python3 test_calc.py &&", "(exit 2)", "the shell cannot read the command"),
        (f"{PYTEST} no_such_tests/", "(exit 4)", "no_such_tests/"),  # a typo'd test path
        (f"{PYTEST} calc.py", "no tests ran (exit 5)", "name the tests"),  # no test in it
    ],
)
def test_a_check_that_cannot_run_stops_before_any_model_call(
    check: str, said: str, fix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    (project / "run_tests.sh").write_text("#!/bin/sh\npython3 test_calc.py\n")  # not executable
    timeout = "3" if check.startswith("sleep") else "300"
    code, server = solve_with(project, tmp_path, "--check-timeout", timeout, check=check)
    captured = capsys.readouterr()
    assert code == 2
    assert [b for b in server.requests if "messages" in b] == []
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert f'--check "{check}"' in lines[0] and said in lines[0] and fix in lines[0]
    assert "Traceback" not in captured.err and captured.out == ""
    assert (project / "calc.py").read_text() == BUGGY


def test_checks_that_already_pass_say_nothing_to_fix_and_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    (project / "calc.py").write_text(FIXED)
    code, server = solve_with(project, tmp_path, "--check", "true")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert server.requests == []
    assert "nothing to fix" in captured.err
    assert captured.out == ""
    assert "run id" not in captured.err  # no run was started


def test_attempt_one_is_shown_how_the_checks_fail_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    with FakeOpenAIServer(policy=solver(lambda body: True)) as server:
        code = main(
            solve_args(server, project, tmp_path / "mem", "--check", "true", "--trials", "1")
        )
        first = server.requests[0]
    assert code == 0, capsys.readouterr().err
    task = next(m["content"] for m in first["messages"] if m["role"] == "user")
    # the failing check's own output, from the preflight, before any change
    assert "$ python3 test_calc.py" in task and "add(2, 3) = -1" in task
    assert "`true` already passes" in task
    assert "where paths start: calc.py, test_calc.py" in task
    # the prompt names the tools and the check to run with them
    for name in ("read_file", "write_file", "list_files", "shell"):
        assert name in task
    assert "python3 test_calc.py" in task.split("already passes")[-1]


def test_a_program_found_outside_the_box_is_named_in_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mulligan.solve.preflight import _not_started

    tools = tmp_path / "private-bin"
    tools.mkdir()
    (tools / "mytool").write_text("#!/bin/sh\n")
    (tools / "mytool").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    said = _not_started("mytool", tmp_path)
    assert f"outside the box it is {tools / 'mytool'}" in said and "/usr/bin/python3" in said


@pytest.mark.parametrize(
    "check", ["cd {dir} && python3 test_calc.py", "python3 '{dir}/test_calc.py'", "{given}/t.sh"]
)
def test_a_check_naming_dir_by_its_path_stops_before_any_model_call(
    check: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each check runs at the root of an attempt's copy: one that names the project by its
    own path would test the untouched project (or fail to reach it in the box) and no
    attempt could pass."""
    project = make_project(tmp_path / "calc")
    given = tmp_path / "link"  # --dir as given need not be the real path
    given.symlink_to(project)
    named = check.format(dir=project, given=given)
    code, server = solve_with(given, tmp_path, check=named)
    assert "relative to" in refused_in_one_line(code, server, capsys, named)
    assert (project / "calc.py").read_text() == BUGGY


def test_a_check_naming_a_tool_in_a_virtual_environment_of_dir_by_its_path_is_let_through(
    tmp_path: Path,
) -> None:
    """A virtual environment is not copied: a check may name its programs by their path
    (the box reaches an activated one there, as PATH finds it)."""
    from mulligan.cli.solve import relative_to

    project = make_project(tmp_path / "calc")
    relative_to(f"{project}/.venv/bin/python -m pytest -q", project)
    relative_to(f"'{project}/node_modules/.bin/jest' --ci", project)
    with pytest.raises(UserError, match="relative to"):
        relative_to(f"{project}/.venv/bin/python {project}/test_calc.py", project)


def test_a_program_in_an_uncopied_virtual_environment_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`.venv/bin/python` is in the project, but not in its copies: the fix is not chmod."""
    project = make_project(tmp_path / "calc")
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "python").symlink_to(sys.executable)
    code, server = solve_with(project, tmp_path, check=".venv/bin/python test_calc.py")
    err = capsys.readouterr().err
    assert code == 2 and server.requests == []
    assert ".venv/ is not copied" in err and "chmod" not in err, err


def test_a_check_that_cannot_cd_into_a_directory_git_ignores_stops_before_any_model_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cd build && ...`: no change to the project can make the copies hold a directory that
    .gitignore leaves out of them (a build directory)."""
    project = make_project(tmp_path / "calc", git=True)  # its .gitignore ignores build/
    (project / "build").mkdir()
    (project / "build" / "run.sh").write_text("cd .. && python3 test_calc.py\n")
    check = "cd build && sh run.sh"
    code, server = solve_with(project, tmp_path, check=check)
    line = refused_in_one_line(code, server, capsys, check)
    assert "build" in line and "leaves it out of the copies" in line


def test_a_directory_the_project_lacks_may_be_one_its_build_was_to_make() -> None:
    from mulligan.solve.preflight import _left_out

    assert not _left_out("dist", Path(__file__).parent)  # a fault a change could mend
    assert not _left_out("/", Path(__file__).parent)
    assert _left_out("solve", Path(__file__).parent.parent)
