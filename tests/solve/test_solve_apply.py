"""A demanding user attacks `mulligan solve --apply`: a user who keeps working meanwhile, and
diffs that add, delete, move or re-mode files. `--apply` writes exactly the change that passed,
or nothing, saying why. The model is scripted (FakeOpenAIServer), no network.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.errors import UserError
from mulligan.solve.diffs import Link, apply_diff, unified_diff
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.helpers.solving import (
    FIX,
    NO_LESSON,
    Calls,
    files_of,
    passes_in,
    reflecting,
    scripted,
    solve,
    turn_of,
)
from tests.solve.test_solve import BUGGY, FIXED, call, make_project, solve_args

# ---------------------------------------------------------------- the user keeps working


def test_a_user_edit_to_the_same_file_during_the_attempt_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    mine = BUGGY + "\n\ndef sub(a, b):\n    return a - b\n"

    def user_edits() -> Calls:
        (project / "calc.py").write_text(mine)
        return [FIX]

    def policy(body: dict[str, Any]) -> FakeReply:
        if turn_of(body) == 0:
            return FakeReply(content=None, tool_calls=user_edits())
        return scripted([FIX])(body)

    code, _ = solve(tmp_path, project, policy, "--apply")
    captured = capsys.readouterr()
    assert code == 2 and "not applied" in captured.err
    assert (project / "calc.py").read_text() == mine


def test_a_user_edit_during_a_failed_attempt_survives_the_next_attempts_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    (project / "notes.md").write_text("v1\n")
    attempts: list[int] = []

    def policy(body: dict[str, Any]) -> FakeReply:
        if reflecting(body):
            return FakeReply(content=NO_LESSON)
        if turn_of(body) > 0:
            return FakeReply(content="Done.")
        attempts.append(len(attempts) + 1)
        if attempts == [1]:
            (project / "notes.md").write_text("v2, the user's\n")  # while attempt 1 runs
        content = "def add(a, b):\n    return a * b\n" if attempts == [1] else FIXED
        return FakeReply(
            content=None, tool_calls=[call("write_file", path="calc.py", content=content)]
        )

    with FakeOpenAIServer(policy=policy) as server:
        argv = solve_args(server, project, tmp_path / "mem", "--trials", "2", "--apply")
        code = main(argv + ["--strategy", "reflexion"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (project / "notes.md").read_text() == "v2, the user's\n"
    assert (project / "calc.py").read_text() == FIXED


# ---------------------------------------------------------------- --apply: what it writes


def test_apply_adds_deletes_and_moves_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    (project / "helpers.py").write_text("SIGN = -1\n")
    (project / "obsolete.txt").write_text("old\n")
    (project / "calc.py").write_text(
        "from helpers import SIGN\n\ndef add(a, b):\n    return a + SIGN * b\n"
    )
    turns = [  # one call a turn: a turn's calls run concurrently
        [call("shell", command="mkdir -p lib && mv helpers.py lib/helpers.py")],
        [call("write_file", path="lib/helpers.py", content="SIGN = 1\n")],
        [call("write_file", path="lib/__init__.py", content="")],
        [
            call(
                "write_file",
                path="calc.py",
                content="from lib.helpers import SIGN\n\ndef add(a, b):\n    return a + SIGN * b\n",
            )
        ],
        [call("shell", command="rm obsolete.txt")],
    ]
    code, _ = solve(tmp_path, project, scripted(*turns), "--apply")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert sorted(files_of(project)) == [
        "calc.py",
        "lib/__init__.py",
        "lib/helpers.py",
        "test_calc.py",
    ], captured.out
    assert (project / "lib" / "__init__.py").read_bytes() == b""
    assert passes_in(project)


def test_a_module_file_becomes_a_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    turns = [
        [call("shell", command="rm calc.py")],
        [call("write_file", path="calc/__init__.py", content=FIXED)],
    ]
    code, _ = solve(tmp_path, project, scripted(*turns), "--apply")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (project / "calc" / "__init__.py").read_text() == FIXED
    assert passes_in(project)


def test_a_path_with_a_space_before_b_slash_is_applied_where_the_diff_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`diff --git a/plan b/x.md b/plan b/x.md`: the path is `plan b/x.md`, not `plan`."""
    project = make_project(tmp_path / "calc")
    turns = [[FIX, call("write_file", path="plan b/x.md", content="fixed add\n")]]
    code, _ = solve(tmp_path, project, scripted(*turns), "--apply")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert not (project / "plan").is_file(), "wrote the new file's text to DIR/plan"
    assert (project / "plan b" / "x.md").read_text() == "fixed add\n"


def test_apply_diff_reads_a_path_with_a_space_before_b_slash(tmp_path: Path) -> None:
    (tmp_path / "plan b").mkdir()
    (tmp_path / "plan b" / "x.md").write_text("one\n")
    applied = apply_diff(
        unified_diff({"plan b/x.md": b"one\n"}, {"plan b/x.md": b"two\n"}), tmp_path
    )
    assert applied == ["plan b/x.md"]
    assert (tmp_path / "plan b" / "x.md").read_text() == "two\n"


def test_a_fix_that_is_only_chmod_is_not_called_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The test runs ./tool.sh, which is not executable; the fix is `chmod +x tool.sh`.
    `solve --apply` exiting 0 must leave the checks passing in DIR."""
    project = make_project(tmp_path / "calc")
    (project / "calc.py").write_text(FIXED)
    (project / "tool.sh").write_text("#!/bin/sh\necho 5\n")
    (project / "test_calc.py").write_text(
        "import subprocess\nout = subprocess.run(['./tool.sh'], capture_output=True, text=True)"
        "\nassert out.stdout.strip() == '5', 'tool.sh did not run'\n"
    )
    assert not passes_in(project)
    code, _ = solve(
        tmp_path, project, scripted([call("shell", command="chmod +x tool.sh")]), "--apply"
    )
    captured = capsys.readouterr()
    assert "changed nothing: the checks pass as it is" not in captured.err, (
        "solve says the checks pass as DIR is, but they fail there"
    )
    assert code != 0 or passes_in(project)


def test_a_new_executable_script_is_applied_executable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    (project / "calc.py").write_text(FIXED)
    (project / "test_calc.py").write_text(
        "import subprocess\nout = subprocess.run(['./tool.sh'], capture_output=True, text=True)"
        "\nassert out.stdout.strip() == '5', 'tool.sh did not run'\n"
    )
    turns = [
        [call("write_file", path="tool.sh", content="#!/bin/sh\necho 5\n")],
        [call("shell", command="chmod +x tool.sh")],
    ]
    code, _ = solve(tmp_path, project, scripted(*turns), "--apply")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "new file mode 100755" in captured.out, "the diff says 100644 for an executable"
    assert os.access(project / "tool.sh", os.X_OK) and passes_in(project)


def test_a_fix_with_a_binary_part_is_not_half_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The passing fix changes calc.py and a data file that is not UTF-8, which the diff
    cannot carry: `--apply` applies nothing and names the file (exit 2), the diff still shown."""
    project = make_project(tmp_path / "calc")
    (project / "rate.dat").write_bytes(b"\xff\xfe rate=-1\n")
    (project / "test_calc.py").write_text(
        "from calc import add\n"
        "assert open('rate.dat', 'rb').read() == b'rate=1\\n', 'rate.dat'\n"
        "assert add(2, 3) == 5\n"
    )
    turns = [[FIX, call("write_file", path="rate.dat", content="rate=1\n")]]
    code, _ = solve(tmp_path, project, scripted(*turns), "--apply")
    captured = capsys.readouterr()
    assert code == 2 and "rate.dat" in captured.err and "nothing applied" in captured.err
    assert "a/calc.py" in captured.out  # the diff, for the user to apply by hand
    assert (project / "calc.py").read_text() == BUGGY
    assert (project / "rate.dat").read_bytes() == b"\xff\xfe rate=-1\n"


# ---------------------------------------------------------------- apply_diff on a changed DIR


def test_apply_diff_does_not_delete_a_file_the_user_has_added_to(tmp_path: Path) -> None:
    """The diff deletes notes.txt as it was; the user has since added lines. git apply
    refuses ("removal patch leaves file contents"); so must mulligan."""
    diff = unified_diff({"notes.txt": b"one\n"}, {})
    (tmp_path / "notes.txt").write_text("one\nthe user's new line\n")
    assert (
        subprocess.run(
            ["git", "apply", "--check", "-"], cwd=tmp_path, input=diff.encode(), capture_output=True
        ).returncode
        != 0
    )
    with pytest.raises(UserError):
        apply_diff(diff, tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "one\nthe user's new line\n"


def test_apply_diff_does_not_delete_an_empty_file_the_user_has_filled(tmp_path: Path) -> None:
    diff = unified_diff({"notes.txt": b""}, {})
    (tmp_path / "notes.txt").write_text("the user's notes\n")
    with pytest.raises(UserError):
        apply_diff(diff, tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "the user's notes\n"


def test_apply_diff_is_all_or_nothing_when_a_write_fails(tmp_path: Path) -> None:
    """A file now stands where the diff makes a directory: one clear error, nothing written."""
    diff = unified_diff({"a.py": b"one\n"}, {"a.py": b"two\n", "z/new.py": b"x\n"})
    (tmp_path / "a.py").write_text("one\n")
    (tmp_path / "z").write_text("the user's file named z\n")
    try:
        apply_diff(diff, tmp_path)
    except UserError:
        pass
    except Exception as exc:  # noqa: BLE001
        pytest.fail(
            f"a traceback, not a clear error: {exc!r}; a.py is now "
            f"{(tmp_path / 'a.py').read_text()!r}"
        )
    else:
        pytest.fail("applied although z is a file")
    assert (tmp_path / "a.py").read_text() == "one\n"
    assert (tmp_path / "z").read_text() == "the user's file named z\n"


def test_apply_diff_does_not_write_through_a_symlink_the_diff_deleted(tmp_path: Path) -> None:
    """The attempt replaced the link `docs -> manual` by a real docs/ with a new page; the
    new page belongs in docs/, not in manual/ through the old link."""
    (tmp_path / "manual").mkdir()
    (tmp_path / "docs").symlink_to("manual")
    diff = unified_diff({"docs": Link("manual")}, {"docs/page.md": b"new\n"})
    assert apply_diff(diff, tmp_path) == ["docs", "docs/page.md"]
    assert not (tmp_path / "manual" / "page.md").exists(), "written into manual/ via the link"
    assert not (tmp_path / "docs").is_symlink()
    assert (tmp_path / "docs" / "page.md").read_text() == "new\n"


def test_apply_diff_carries_symlinks_and_modes_as_git_does(tmp_path: Path) -> None:
    """A new link, a retargeted link and a mode change, in git's own format (git apply reads
    it the same way)."""
    before = {"old": Link("a.txt"), "run.sh": b"echo hi\n", "a.txt": b"a\n"}
    after = {"old": Link("b.txt"), "new": Link("a.txt"), "run.sh": b"echo hi\n", "a.txt": b"a\n"}
    diff = unified_diff(before, after, (frozenset(), frozenset({"run.sh"})))
    assert "new file mode 120000" in diff and "old mode 100644\nnew mode 100755" in diff
    for root in (tmp_path / "git", tmp_path / "ours"):
        root.mkdir()
        (root / "old").symlink_to("a.txt")
        (root / "run.sh").write_text("echo hi\n")
        (root / "a.txt").write_text("a\n")
    git = subprocess.run(["git", "apply", "-"], cwd=tmp_path / "git", input=diff.encode())
    assert git.returncode == 0
    assert sorted(apply_diff(diff, tmp_path / "ours")) == ["new", "old", "run.sh"]
    for root in (tmp_path / "git", tmp_path / "ours"):
        assert os.readlink(root / "old") == "b.txt" and os.readlink(root / "new") == "a.txt"
        assert os.access(root / "run.sh", os.X_OK), root


def test_resume_apply_of_a_finished_run_does_not_lose_the_users_later_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run 1 passes without --apply (its fix deletes notes.txt). The user adds to notes.txt,
    then applies run 1's fix with `--resume RUN --apply`: their new line must survive."""
    project = make_project(tmp_path / "calc")
    (project / "notes.txt").write_text("todo: fix add\n")
    turns = [[FIX, call("shell", command="rm notes.txt")]]
    code, _ = solve(tmp_path, project, scripted(*turns))
    first = capsys.readouterr()
    assert code == 0, first.err
    assert "deleted file mode" in first.out
    run_id = first.err.split("run id: ")[1].split()[0]
    (project / "notes.txt").write_text("todo: fix add\ncall the bank on monday\n")
    code, _ = solve(tmp_path, project, scripted(*turns), "--apply", "--resume", run_id)
    again = capsys.readouterr()
    assert (project / "notes.txt").exists(), (
        f"notes.txt, with the user's later line, was deleted (exit {code}): "
        f"{again.err.strip().splitlines()[-1:]}"
    )


def test_a_write_the_system_refuses_undoes_what_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills (ENOSPC) at the diff's second change: the first is undone, one clear
    error names the file."""
    import errno

    (tmp_path / "a.py").write_text("one\n")
    (tmp_path / "gone.txt").write_text("bye\n")
    (tmp_path / "gone.txt").chmod(0o751)
    diff = unified_diff(
        {"a.py": b"one\n", "gone.txt": b"bye\n"}, {"a.py": b"two\n", "link": Link("a.py")}
    )

    def full(self: Path, target: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "symlink_to", full)
    with pytest.raises(UserError, match="link: No space left on device; nothing applied"):
        apply_diff(diff, tmp_path)
    assert (tmp_path / "a.py").read_text() == "one\n"
    assert (tmp_path / "gone.txt").read_text() == "bye\n"
    assert (tmp_path / "gone.txt").stat().st_mode & 0o777 == 0o751
    assert not (tmp_path / "link").exists()


def test_apply_with_standard_output_closed_early_still_applies(tmp_path: Path) -> None:
    """`mulligan solve --apply ... | head -0` (or a pager quit at once): the diff cannot be
    written, but the fix the user asked for is still applied, and said, not a traceback nor
    the console script's silent death by SIGPIPE."""
    import json
    import shlex
    import sys

    from tests.helpers.killing import environment

    project = make_project(tmp_path / "calc")
    with FakeOpenAIServer(policy=scripted([FIX])) as server:
        argv = solve_args(server, project, tmp_path / "mem", "--trials", "1", "--apply")
        script = f"import sys\nfrom mulligan.cli import entry\nsys.argv[1:] = {json.dumps(argv)}\nentry()"
        command = shlex.join([sys.executable, "-c", script])
        done = subprocess.run(
            f"{command} | true; exit ${{PIPESTATUS[0]}}",
            shell=True, executable="/bin/bash", capture_output=True, text=True,
            env=environment(), timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert "standard output" in done.stderr and "applied to" in done.stderr
    assert (project / "calc.py").read_text() == FIXED


def test_a_diff_whose_reader_has_gone_leaves_no_descriptor_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Standard output is pointed at os.devnull once its reader has gone; the descriptor
    opened for that is closed again (only standard output's own stays)."""
    from mulligan.cli import solve as solve_command

    reading, writing = os.pipe()
    os.close(reading)  # the reader has gone: a write raises BrokenPipeError
    with open(writing, "w") as out:
        monkeypatch.setattr("sys.stdout", out)
        before = sorted(os.listdir("/proc/self/fd"))
        assert solve_command._printed("--- a/calc.py\n+++ b/calc.py\n") is False
        assert sorted(os.listdir("/proc/self/fd")) == before
        assert os.readlink(f"/proc/self/fd/{writing}") == os.devnull
