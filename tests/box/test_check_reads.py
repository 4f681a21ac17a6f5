"""Checks read only inside the workspace: workspace links that point out of it are not followed."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import pytest

from mulligan import sandbox
from mulligan.actor import ToolRegistry, build_tools
from mulligan.schema import (
    CheckResult,
    FileCheck,
    PythonTestsCheck,
    ToolCall,
)
from tests.helpers.boxing import (
    IS_ROOT,
    assert_no_leak,
    run_check,
    token,
    workspace,
)

__all__ = ["workspace"]  # fixtures from tests/helpers/boxing.py


# ---------------------------------------------------------------- 5. checks read only inside the workspace


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace with a file the candidate must not get at."""
    directory = tmp_path / "outside"
    directory.mkdir()
    secret = f"SECRET_{token()}"
    (directory / "answer.txt").write_text(f"{secret}\n")
    (directory / "solution.py").write_text(f"def double(x):\n    return 2 * x\n{secret}\n")
    return directory


def secret_in(outside: Path) -> str:
    return (outside / "answer.txt").read_text().strip()


def test_file_check_does_not_follow_a_symlink_to_a_root_only_file(workspace: Path) -> None:
    if not IS_ROOT:
        pytest.skip("needs root to read /etc/shadow")
    shadow = Path("/etc/shadow").read_text()
    (workspace / "answer.txt").symlink_to("/etc/shadow")
    for check in (
        FileCheck(path="answer.txt"),
        FileCheck(path="answer.txt", matches=r"^root:"),
        FileCheck(path="answer.txt", contains="root:"),
    ):
        result = run_check(check, "", workspace)
        assert not result.passed, result.detail
        assert_no_leak(result.detail, shadow)


def test_file_check_does_not_follow_a_symlink_out_of_the_workspace(
    workspace: Path, outside: Path
) -> None:
    (workspace / "answer.txt").symlink_to(outside / "answer.txt")
    for check in (FileCheck(path="answer.txt"), FileCheck(path="answer.txt", matches="SECRET_")):
        result = run_check(check, "", workspace)
        assert not result.passed, result.detail
        assert secret_in(outside) not in result.detail


def test_file_check_does_not_follow_a_symlinked_parent_directory(
    workspace: Path, outside: Path
) -> None:
    (workspace / "sub").symlink_to(outside, target_is_directory=True)
    result = run_check(FileCheck(path="sub/answer.txt", matches="SECRET_"), "", workspace)
    assert not result.passed, result.detail
    assert secret_in(outside) not in result.detail


def test_file_check_does_not_read_a_hard_link_to_a_root_only_file(workspace: Path) -> None:
    if not IS_ROOT:
        pytest.skip("needs root to read /etc/shadow")
    shadow = Path("/etc/shadow").read_text()
    planted = sandbox.run_shell(
        "ln /etc/shadow answer.txt; ln -s /etc/shadow link.txt; echo planted",
        cwd=workspace,
        writable=True,
    )
    assert "planted" in planted.stdout, planted.describe()
    read_file = ToolRegistry.of(build_tools(["read_file"], workspace=workspace))
    for path in ("answer.txt", "link.txt"):
        result = run_check(FileCheck(path=path, matches=r"^root:"), "", workspace)
        assert not result.passed, result.detail
        assert_no_leak(result.detail, shadow)
        call = ToolCall(id="c", name="read_file", arguments=json.dumps({"path": path}))
        assert_no_leak(read_file.run(call).output, shadow)


def test_python_tests_file_does_not_follow_a_symlink_out_of_the_workspace(
    workspace: Path, outside: Path
) -> None:
    (workspace / "solution.py").symlink_to(outside / "solution.py")
    check = PythonTestsCheck(tests="assert double(4) == 8", file="solution.py")
    result = run_check(check, "done", workspace)
    assert not result.passed, result.detail
    assert secret_in(outside) not in result.detail


def test_python_tests_file_does_not_follow_a_symlinked_parent_directory(
    workspace: Path, outside: Path
) -> None:
    (workspace / "pkg").symlink_to(outside, target_is_directory=True)
    check = PythonTestsCheck(tests="assert double(4) == 8", file="pkg/solution.py")
    result = run_check(check, "done", workspace)
    assert not result.passed, result.detail
    assert secret_in(outside) not in result.detail


def test_python_tests_file_does_not_read_a_root_only_file(workspace: Path) -> None:
    if not IS_ROOT:
        pytest.skip("needs root to read /etc/shadow")
    shadow = Path("/etc/shadow").read_text()
    (workspace / "solution.py").symlink_to("/etc/shadow")
    check = PythonTestsCheck(tests="assert double(4) == 8", file="solution.py")
    result = run_check(check, "done", workspace)
    assert not result.passed, result.detail
    assert_no_leak(result.detail, shadow)


def run_in_thread(action: Callable[[], object], fifo: Path) -> object:
    """Run `action`; if it blocks on the FIFO, unblock it (open the FIFO's other end) and say so."""
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(action()), daemon=True)
    thread.start()
    thread.join(timeout=10)
    if thread.is_alive():
        with suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=5)
        return "HUNG"
    return outcome[0] if outcome else None


def plant_fifos(workspace: Path) -> None:
    planted = sandbox.run_python(
        "import os\nos.mkfifo('answer.txt')\nos.mkfifo('solution.py')\nprint('planted')",
        cwd=workspace,
        writable=True,
    )
    assert "planted" in planted.stdout, planted.describe()


def test_a_fifo_planted_in_the_workspace_does_not_hang_the_checks(workspace: Path) -> None:
    plant_fifos(workspace)
    file_check = run_in_thread(
        lambda: run_check(FileCheck(path="answer.txt", contains="x"), "", workspace),
        workspace / "answer.txt",
    )
    assert file_check != "HUNG" and isinstance(file_check, CheckResult)
    assert not file_check.passed
    tests_check = run_in_thread(
        lambda: run_check(
            PythonTestsCheck(tests="assert double(4) == 8", file="solution.py"), "done", workspace
        ),
        workspace / "solution.py",
    )
    assert tests_check != "HUNG" and isinstance(tests_check, CheckResult)
    assert not tests_check.passed


def test_a_fifo_planted_in_the_workspace_does_not_hang_read_file(workspace: Path) -> None:
    plant_fifos(workspace)
    registry = ToolRegistry.of(build_tools(["read_file"], workspace=workspace))
    call = ToolCall(id="c", name="read_file", arguments=json.dumps({"path": "answer.txt"}))
    assert run_in_thread(lambda: registry.run(call), workspace / "answer.txt") != "HUNG"


def test_python_tests_file_inside_the_workspace_still_works(workspace: Path) -> None:
    (workspace / "solution.py").write_text("def double(x):\n    return 2 * x\n")
    check = PythonTestsCheck(tests="assert double(4) == 8", file="solution.py")
    assert run_check(check, "done", workspace).passed
