"""`solve` killed with SIGKILL (a real child process, stopped at a chosen point first):
while a candidate's checks run, `--dir` is untouched; while `--apply` writes the passing
diff, every file of `--dir` is its old or its new self, and the next `solve` there ends it
holding the whole diff (the journal had committed it) or none of it (it had not).

What "whole" means across several files is the journal's (mulligan/solve/journal.py): the
change counts as applied from the instant its journal is rewritten `committed`."""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest

from mulligan.errors import UserError
from mulligan.solve.diffs import Link, apply_diff, unified_diff
from mulligan.solve.journal import JOURNAL, STAGED, WRITING, finish_interrupted
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.helpers.killing import cli_code, environment, killed, process_with, stopped_at
from tests.helpers.solving import NO_LESSON, reflecting, scripted
from tests.solve.test_solve import BUGGY, FIXED, TEST, call, make_project, solve_args

HELPERS = "SIGN = 1\n"
BEFORE = {"calc.py": BUGGY.encode(), "test_calc.py": TEST.encode(), "obsolete.txt": b"old\n",
          "run.sh": b"echo hi\n"}  # fmt: skip
AFTER = {"calc.py": FIXED.encode(), "test_calc.py": TEST.encode(), "lib/helpers.py": HELPERS.encode(),
         "run.sh": b"echo hi\n", "latest": Link("calc.py")}  # fmt: skip
"""A diff that changes a file, deletes one, adds one in a new directory, adds a symlink and
makes a script executable."""
DIFF = unified_diff(BEFORE, AFTER, (frozenset(), frozenset({"run.sh"})))
JOURNAL_CODE = "mulligan.solve.journal:"


def lay_out(root: Path) -> Path:
    root.mkdir()
    for name, content in BEFORE.items():
        (root / name).write_bytes(content)  # type: ignore[arg-type]
    return root


def state(root: Path) -> dict[str, Any]:
    """Every entry under root: a file's bytes and permission bits, a link's target, a
    directory."""
    found: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_dir():
            found[name] = ("directory",)
        else:
            found[name] = (path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
    return found


def visible(found: dict[str, Any]) -> dict[str, Any]:
    """What the user's project holds: the journal and staged files aside."""
    return {
        name: entry
        for name, entry in found.items()
        if Path(name).name not in (JOURNAL, WRITING) and STAGED not in Path(name).name
    }


@pytest.fixture
def expected(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The directory before the diff, and after it applied uninterrupted."""
    reference = lay_out(tmp_path / "reference")
    before = state(reference)
    apply_diff(DIFF, reference)
    return before, state(reference)


def apply_in_a_child(point: str, nth: int, tmp_path: Path) -> Path:
    """`apply_diff` to a new directory in a child process, killed at the nth call of `point`
    (a function of the journal's module, or `os:replace`: the journal's file written, not
    renamed); the directory."""
    directory = lay_out(tmp_path / "project")
    (tmp_path / "diff").write_text(DIFF)
    code = (
        "from mulligan.solve.diffs import apply_diff\n"
        f"apply_diff(Path({str(tmp_path / 'diff')!r}).read_text(), Path({str(directory)!r}))"
    )
    where = point if ":" in point else f"{JOURNAL_CODE}{point}"
    killed(stopped_at(where, nth, code, tmp_path / f"ready-{uuid.uuid4()}"))
    return directory


@pytest.mark.parametrize(
    ("point", "nth"),
    [("os:replace", 1), ("_stage", 1), ("_stage", 3), ("_record", 2)],
    ids=[
        "journal-written-not-renamed",
        "before-the-first-stage",
        "after-two-of-four-staged",
        "all-staged-before-the-commit",
    ],  # fmt: skip
)
def test_a_kill_before_the_commit_leaves_every_file_as_it_was_and_is_undone(
    point: str, nth: int, tmp_path: Path, expected: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    directory = apply_in_a_child(point, nth, tmp_path)
    before = expected[0]
    assert visible(state(directory)) == before
    done = finish_interrupted(directory)
    assert done is None or done[0] == "undid"
    assert state(directory) == before, "the staged files and the journal are gone"


@pytest.mark.parametrize(
    ("point", "nth"),
    [("_carry_out", 1), ("_carry_out", 3), ("_forget", 1)],
    ids=["committed-nothing-moved", "committed-two-of-five-done", "all-done-journal-left"],
)
def test_a_kill_after_the_commit_is_finished_to_the_whole_diff(
    point: str, nth: int, tmp_path: Path, expected: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    before, after = expected
    directory = apply_in_a_child(point, nth, tmp_path)
    now = visible(state(directory))
    for name in now.keys() | after.keys() | before.keys():
        assert now.get(name) in (before.get(name), after.get(name)), f"{name} is half-written"
    assert finish_interrupted(directory) == (
        "finished",
        sorted(AFTER.keys() - {"test_calc.py"} | {"obsolete.txt"}),
    )
    assert state(directory) == after
    assert finish_interrupted(directory) is None


def test_a_file_the_user_changed_before_the_finish_is_not_written_over(
    tmp_path: Path, expected: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    directory = apply_in_a_child("_carry_out", 1, tmp_path)
    (directory / "calc.py").write_text("# the user's own edit\n")
    from mulligan.errors import UserError

    with pytest.raises(UserError, match="calc.py changed since the --apply"):
        finish_interrupted(directory)
    assert (directory / "calc.py").read_text() == "# the user's own edit\n"
    assert (directory / "lib" / "helpers.py").read_text() == HELPERS  # the rest is applied
    assert (directory / JOURNAL).exists()


# ---------------------------------------------------------------- `mulligan solve`, killed

FIX_TURNS = [
    [call("write_file", path="calc.py", content=FIXED)],
    [call("write_file", path="lib/helpers.py", content=HELPERS)],
    [call("shell", command="rm obsolete.txt")],
]


def nothing_done(body: dict[str, Any]) -> FakeReply:
    """An actor that changes nothing (a run after the kill that must not fix anything)."""
    return FakeReply(content=NO_LESSON if reflecting(body) else "Done.")


def a_project(tmp_path: Path) -> Path:
    project = make_project(tmp_path / "calc")
    (project / "obsolete.txt").write_text("old\n")
    return project


def solve_killed_at(point: str, nth: int, project: Path, tmp_path: Path) -> str:
    """`mulligan solve --apply` in a child, killed at the nth call of `point`; its stderr."""
    with FakeOpenAIServer(policy=scripted(*FIX_TURNS)) as server:
        argv = solve_args(server, project, tmp_path / "mem", "--trials", "1", "--yes", "--apply")
        child = stopped_at(point, nth, cli_code(argv), tmp_path / f"ready-{uuid.uuid4()}")
        _, err = killed(child)
    return err


def solve_again(project: Path, tmp_path: Path) -> tuple[int, str]:
    """The next `mulligan solve` in the directory, with a model that changes nothing."""
    import subprocess
    import sys

    with FakeOpenAIServer(policy=nothing_done) as server:
        argv = solve_args(server, project, tmp_path / "mem", "--trials", "1")
        done = subprocess.run(
            [sys.executable, "-m", "mulligan.cli", *argv],
            capture_output=True,
            text=True,
            env=environment(),
            timeout=300,
        )
    return done.returncode, done.stderr


def test_solve_killed_midway_through_apply_is_finished_by_the_next_solve(tmp_path: Path) -> None:
    project = a_project(tmp_path)
    solve_killed_at(f"{JOURNAL_CODE}_carry_out", 2, project, tmp_path)
    assert (project / JOURNAL).exists()
    assert not (project / "obsolete.txt").exists() and (project / "calc.py").read_text() == BUGGY
    code, err = solve_again(project, tmp_path)
    assert "was interrupted; finished it: calc.py, lib/helpers.py, obsolete.txt" in err, err
    assert "every check already passes" in err and code == 0, err
    assert sorted(state(project)) == ["calc.py", "lib", "lib/helpers.py", "test_calc.py"]
    assert (project / "calc.py").read_text() == FIXED
    assert (project / "lib" / "helpers.py").read_text() == HELPERS


def test_solve_killed_while_staging_its_apply_leaves_dir_as_it_was(tmp_path: Path) -> None:
    project = a_project(tmp_path)
    before = state(project)
    solve_killed_at(f"{JOURNAL_CODE}_stage", 2, project, tmp_path)
    assert visible(state(project)) == before
    code, err = solve_again(project, tmp_path)
    assert "was interrupted; undid it" in err and "(none of it had been written)" in err, err
    assert code == 1, err  # the model changed nothing this time
    assert state(project) == before


def test_solve_killed_while_a_candidates_checks_run_leaves_dir_untouched(tmp_path: Path) -> None:
    """The check passes on the fixed copy, then waits (marked), as a slow test suite would;
    the solve is killed then. The check's processes die with it."""
    project = a_project(tmp_path)
    marker = f"mulligan-check-running-{uuid.uuid4().hex}"
    (project / "test_calc.py").write_text(
        TEST + "import os, sys\n"
        f"os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', "
        f"{marker!r}])\n"
    )
    before = state(project)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with FakeOpenAIServer(policy=scripted(*FIX_TURNS)) as server:
        argv = solve_args(server, project, tmp_path / "mem", "--trials", "1", "--yes", "--apply")
        import subprocess
        import sys
        import time

        child = subprocess.Popen(
            [sys.executable, "-m", "mulligan.cli", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(TMPDIR=str(scratch)),
        )
        deadline = time.monotonic() + 180
        while (check := process_with(marker)) is None:
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the candidate's check never ran"
            time.sleep(0.05)
        killed(child)
    assert state(project) == before
    deadline = time.monotonic() + 30
    while process_with(marker) is not None:
        assert time.monotonic() < deadline, f"the check (pid {check}) outlived the solve"
        time.sleep(0.1)
    left = sorted(p.name.rstrip("0123456789_abcdefghijklmnopqrstuvwxyz") for p in scratch.iterdir())
    print("left in the temporary directory:", left)
    shutil.rmtree(scratch)  # the copy the candidate worked in, which the kill left behind


def test_a_solve_starting_while_another_applies_waits_for_it_and_undoes_nothing(
    tmp_path: Path, expected: tuple[dict[str, Any], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `solve`s on one DIR: the second starts (and looks for an interrupted --apply)
    while the first is staging its diff. The first's journal is live, not interrupted: it is
    left alone, and the first applies its whole diff."""
    import threading

    from mulligan.solve import journal

    root = lay_out(tmp_path / "project")
    staging, go_on = threading.Event(), threading.Event()
    stage = journal._stage

    def slow_stage(*args: Any) -> None:
        stage(*args)
        staging.set()
        go_on.wait()

    monkeypatch.setattr(journal, "_stage", slow_stage)
    failed: list[BaseException] = []
    found: list[Any] = []

    def first() -> None:
        try:
            apply_diff(DIFF, root)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failed.append(exc)

    applying = threading.Thread(target=first)
    applying.start()
    staging.wait()
    second = threading.Thread(target=lambda: found.append(finish_interrupted(root)))
    second.start()
    second.join(timeout=0.5)  # it waits for the first; give it the chance not to
    go_on.set()
    applying.join()
    second.join()
    assert failed == [] and found == [None]
    assert state(root) == expected[1]


def test_a_file_changed_after_the_diff_was_read_leaves_every_file_as_it_was(
    tmp_path: Path, expected: tuple[dict[str, Any], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user (or another `solve`'s --apply) changes a file the diff changes after it was
    read and before it is written: nothing is applied, not the rest of the diff around it."""
    from mulligan.solve import diffs, journal

    root = lay_out(tmp_path / "project")
    write = journal.apply_whole

    def user_saves_first(at: Path, writes: list[journal.Write]) -> None:
        (root / "calc.py").write_text("# the user's\n" + BUGGY)
        write(at, writes)

    monkeypatch.setattr(diffs, "apply_whole", user_saves_first)
    with pytest.raises(UserError, match="calc.py"):
        apply_diff(DIFF, root)
    mode = expected[0]["calc.py"][1]
    users = {**expected[0], "calc.py": (("# the user's\n" + BUGGY).encode(), mode)}
    assert state(root) == users


def test_a_file_that_becomes_a_directory_of_its_name_is_applied(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "lib").write_text("x\n")
    assert apply_diff(unified_diff({"lib": b"x\n"}, {"lib/x.py": b"y\n"}), root)
    assert state(root) == {"lib": ("directory",), "lib/x.py": (b"y\n", state(root)["lib/x.py"][1])}


def test_ctrl_c_while_staging_leaves_dir_exactly_as_it_was(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) before the commit: the process is alive to undo what it staged, so
    nothing is left for a next `solve` to find (no journal, no hidden staged files)."""
    import signal

    project = a_project(tmp_path)
    before = state(project)
    with FakeOpenAIServer(policy=scripted(*FIX_TURNS)) as server:
        argv = solve_args(server, project, tmp_path / "mem", "--trials", "1", "--yes", "--apply")
        point = f"{JOURNAL_CODE}_stage"
        child = stopped_at(point, 2, cli_code(argv), tmp_path / f"ready-{uuid.uuid4()}")
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert state(project) == before
