"""A demanding user attacks `mulligan solve`'s copies: odd directories and files, and a model
that reaches outside its copy. Nothing the user gave is lost or overwritten, bad input is one
clear line (exit 2), never a traceback. The model is scripted (FakeOpenAIServer), no network.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.solve.diffs import MAX_DIFF_BYTES
from tests.helpers.solving import FIX, files_of, one_line_error, passes_in, scripted, solve
from tests.solve.test_solve import BUGGY, CHECK, FIXED, call, make_project, tool_outputs

# ---------------------------------------------------------------- odd --dir and --check


def test_a_dir_with_spaces_and_unicode_is_solved_and_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "my calc — ünïcode 计算")
    code, _ = solve(tmp_path, project, scripted([FIX]), "--apply")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (project / "calc.py").read_text() == FIXED
    assert passes_in(project)


@pytest.mark.parametrize("empty", ["", "   "])
def test_an_empty_check_is_one_line_and_exit_2(
    empty: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    code, server = solve(tmp_path, project, scripted([FIX]), check=empty)
    assert code == 2 and server.requests == []
    assert "at least one --check" in one_line_error(capsys.readouterr().err)


def test_a_dir_that_is_a_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    code, server = solve(tmp_path, project / "calc.py", scripted([FIX]))
    assert code == 2 and server.requests == []
    assert "not a directory" in one_line_error(capsys.readouterr().err)
    assert (project / "calc.py").read_text() == BUGGY


def test_an_empty_dir_argument_is_refused_not_taken_as_the_current_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--dir "$PROJECT"` with PROJECT unset is refused like an empty --check, not taken as
    the current directory."""
    project = make_project(tmp_path / "calc")
    monkeypatch.chdir(project)
    argv = ["solve", "make the test pass", "--check", CHECK, "--dir", "", "--yes"]
    assert main([*argv, "--memory", str(tmp_path / "mem")]) == 2
    assert "--dir" in one_line_error(capsys.readouterr().err)
    assert (project / "calc.py").read_text() == BUGGY


def test_the_filesystem_root_as_dir_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--dir "$PROJECT/"` with PROJECT unset is `--dir /`: a copy of the whole filesystem
    (with /proc) per attempt is never what was meant."""
    code, server = solve(tmp_path, Path("/"), scripted([FIX]))
    assert code == 2 and server.requests == []
    assert "--dir /" in one_line_error(capsys.readouterr().err)


@pytest.mark.parametrize("memory", [".", ".."])
def test_a_dir_inside_the_memory_is_refused_before_anything_is_written(
    memory: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--memory` names DIR or a directory above it: the copies would leave the project out
    (mulligan's memory is never copied) and its database would land in the project."""
    project = make_project(tmp_path / "calc")
    before = files_of(project)
    code, server = solve(tmp_path, project, scripted([FIX]), "--memory", str(project / memory))
    assert code == 2 and server.requests == []
    assert "--memory" in one_line_error(capsys.readouterr().err)
    assert files_of(project) == before


# ---------------------------------------------------------------- odd files in --dir


@pytest.mark.parametrize("git", [False, True])
def test_a_file_name_that_is_not_utf8_is_named_not_a_crash(
    git: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc", git=git)
    odd = os.fsencode(project) + b"/caf\xe9.txt"  # a latin-1 name, as old archives have
    with open(odd, "wb") as handle:
        handle.write(b"keep me\n")
    code, server = solve(tmp_path, project, scripted([FIX]), "--apply")
    captured = capsys.readouterr()
    assert code == 2 and "caf" in one_line_error(captured.err)
    assert server.requests == []  # named before any model call
    assert (project / "calc.py").read_text() == BUGGY
    with open(odd, "rb") as handle:
        assert handle.read() == b"keep me\n"


VERIFY = """\
import hashlib, os, sys
want = {sums!r}
for name, digest in want.items():
    got = hashlib.sha256(open(name, 'rb').read()).hexdigest()
    assert got == digest, f'{{name}} differs in the copy'
assert open('inner/link.py').read() == open('calc.py').read(), 'inner symlink broken'
assert os.path.islink('dangling') and not os.path.exists('dangling'), 'dangling link lost'
import calc
assert calc.add(2, 3) == 5, 'add is wrong'
print('ok')
"""


def test_binary_latin1_and_symlinked_files_are_copied_exactly_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import hashlib

    project = make_project(tmp_path / "calc")
    (project / "logo.png").write_bytes(bytes(range(256)) * 4)  # NULs: binary
    (project / "legacy.txt").write_bytes("caf\xe9 cr\xe8me\r\n".encode("latin-1"))
    (project / "inner").mkdir()
    (project / "inner" / "link.py").symlink_to("../calc.py")
    (project / "dangling").symlink_to("no/such/file")
    sums = {
        name: hashlib.sha256((project / name).read_bytes()).hexdigest()
        for name in ("logo.png", "legacy.txt")
    }
    (project / "verify.py").write_text(VERIFY.format(sums=sums))
    before = files_of(project)
    code, _ = solve(tmp_path, project, scripted([FIX]), "--apply", check="python3 verify.py")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.count("diff --git") == 1 and "a/calc.py" in captured.out
    after = files_of(project)
    assert after == {**before, "calc.py": FIXED.encode()}


def test_a_large_file_is_copied_exactly_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import hashlib

    project = make_project(tmp_path / "calc")
    (project / "data.bin").write_bytes(os.urandom(3 * MAX_DIFF_BYTES))
    digest = hashlib.sha256((project / "data.bin").read_bytes()).hexdigest()
    check = (
        f'{CHECK} && python3 -c "import hashlib; '
        f"assert hashlib.sha256(open('data.bin', 'rb').read()).hexdigest() == '{digest}'\""
    )
    before = files_of(project)
    code, _ = solve(tmp_path, project, scripted([FIX]), "--apply", check=check)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.count("diff --git") == 1 and "a/calc.py" in captured.out
    assert files_of(project) == {**before, "calc.py": FIXED.encode()}


def test_a_large_file_is_never_held_whole(tmp_path: Path) -> None:
    """A project's data file is copied into each attempt's copy in pieces and compared by
    its digest: the memory a copy takes does not grow with it."""
    import tracemalloc

    from mulligan.schema import Task
    from mulligan.solve.copies import Project, ProjectCopies

    project = make_project(tmp_path / "calc")
    size = 16 * MAX_DIFF_BYTES
    (project / "data.bin").write_bytes(os.urandom(size))
    copies = ProjectCopies(Project(project))
    tracemalloc.start()
    try:
        with copies(Task(id="t", prompt="p")) as workspace:
            (workspace / "calc.py").write_text(FIXED)
            (workspace / "data.bin").write_bytes(b"smaller now")
            changes = copies.changes(workspace, 1)
            assert copies.changed_since(1) == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (
        "Binary files a/data.bin and b/data.bin differ" in changes
        and "+    return a + b" in changes
    )
    assert peak < size / 4, f"{peak} bytes held at once for a file of {size}"


def test_an_executable_script_stays_executable_in_the_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    script = project / "run_tests.sh"
    script.write_text("#!/bin/sh\nexec python3 test_calc.py\n")
    script.chmod(0o755)
    code, _ = solve(tmp_path, project, scripted([FIX]), "--apply", check="./run_tests.sh")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert passes_in(project, "./run_tests.sh")


def test_an_empty_directory_the_project_needs_is_in_the_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The project keeps an empty `out/` the tests write into; the copy must have it too."""
    project = make_project(tmp_path / "calc")
    (project / "out").mkdir()
    (project / "test_calc.py").write_text(
        "import os\nfrom calc import add\nassert os.path.isdir('out'), 'out/ is missing'\n"
        "assert add(2, 3) == 5, f'add(2, 3) = {add(2, 3)}'\n"
    )
    said = subprocess.run(CHECK, shell=True, cwd=project, capture_output=True, text=True).stderr
    assert "add(2, 3) = -1" in said  # in DIR: the bug only
    code, _ = solve(tmp_path, project, scripted([FIX]), "--apply")
    captured = capsys.readouterr()
    assert code == 0, f"the fix did not pass in the copy: {captured.err[-600:]}"
    assert passes_in(project)


# ---------------------------------------------------------------- a model that reaches out


def test_the_model_cannot_write_outside_its_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's\n")
    sibling = tmp_path / f"escape-{uuid.uuid4().hex[:8]}.txt"
    turns = [
        [
            call("write_file", path="../escape.txt", content="x"),
            call("write_file", path=str(outside), content="pwned"),
            call("write_file", path=str(project / "calc.py"), content="pwned"),
        ],
        [
            call("shell", command=f"echo pwned > {outside}; echo pwned > {project}/calc.py"),
            call("shell", command=f"echo pwned > ../{sibling.name}; echo x > /tmp/{sibling.name}"),
            call("python", code=f"open({str(outside)!r}, 'w').write('pwned')"),
        ],
        [FIX],
    ]
    code, server = solve(tmp_path, project, scripted(*turns))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert outside.read_text() == "the user's\n"
    assert (project / "calc.py").read_text() == BUGGY
    assert not (tmp_path / "escape.txt").exists() and not sibling.exists()
    assert not Path("/tmp", sibling.name).exists()
    refused = tool_outputs(server)[:3]
    assert all("not allowed" in r or "outside" in r for r in refused), refused
    assert captured.out.count("diff --git") == 1  # only calc.py


def test_a_symlink_to_a_file_outside_the_project_is_not_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    settings = elsewhere / "settings.cfg"
    settings.write_text("user settings\n")
    project = make_project(tmp_path / "calc")
    (project / "settings.cfg").symlink_to(settings)  # absolute
    (project / "rel.cfg").symlink_to("../elsewhere/settings.cfg")
    turns = [
        [call("write_file", path="settings.cfg", content="pwned")],
        [call("shell", command="echo pwned > settings.cfg; echo pwned > rel.cfg")],
        [call("python", code="open('settings.cfg', 'w').write('pwned')")],
        [FIX],
    ]
    code, _ = solve(tmp_path, project, scripted(*turns), "--apply")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert settings.read_text() == "user settings\n"
    assert os.readlink(project / "settings.cfg") == str(settings)
    assert (project / "calc.py").read_text() == FIXED


def test_a_fix_that_replaces_a_link_to_outside_says_why_it_is_not_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attempt swaps the link settings.cfg (to a file outside DIR) for a file of its own.
    Refusing is fine, but with one line naming the file, and the outside file untouched."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    settings = elsewhere / "settings.cfg"
    settings.write_text("user settings\n")
    project = make_project(tmp_path / "calc")
    (project / "settings.cfg").symlink_to(settings)
    turns = [[call("shell", command="rm settings.cfg && echo replaced > settings.cfg")], [FIX]]
    code, _ = solve(tmp_path, project, scripted(*turns), "--apply")
    captured = capsys.readouterr()
    assert settings.read_text() == "user settings\n"
    assert os.readlink(project / "settings.cfg") == str(settings)
    if code == 2:
        assert "settings.cfg" in captured.err.strip().splitlines()[-1]
        assert (project / "calc.py").read_text() == BUGGY
    else:
        assert code == 0 and "not applied" in captured.err and "settings.cfg" in captured.err


# ---------------------------------------------------------------- more odd entries in --dir


def test_a_fifo_and_a_socket_in_dir_neither_hang_nor_crash_solve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    project = make_project(tmp_path / "calc")
    os.mkfifo(project / "pipe")
    server_socket = socket.socket(socket.AF_UNIX)
    server_socket.bind(str(project / "agent.sock"))
    try:
        code, _ = solve(tmp_path, project, scripted([FIX]), "--apply")
    finally:
        server_socket.close()
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert stat.S_ISFIFO((project / "pipe").lstat().st_mode)
    assert (project / "calc.py").read_text() == FIXED


@contextlib.contextmanager
def mounted_read_only(directory: Path, at: Path) -> Iterator[Path]:
    """`directory` as a read-only filesystem at `at` (a CD, a read-only volume, a store)."""
    at.mkdir()
    done = subprocess.run(["mount", "--bind", "-o", "ro", str(directory), str(at)], check=False)
    if done.returncode != 0:
        pytest.skip("mounting read-only needs root and the right to mount")
    try:
        yield at
    finally:
        subprocess.run(["umount", str(at)], check=True)


def test_a_dir_on_a_read_only_filesystem_is_solved_without_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --apply nothing is written to DIR, so DIR need not be writable."""
    source = make_project(tmp_path / "calc")
    with mounted_read_only(source, tmp_path / "mounted") as project:
        code, _ = solve(tmp_path, project, scripted([FIX]))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "a/calc.py" in captured.out and (source / "calc.py").read_text() == BUGGY


def test_apply_to_a_read_only_filesystem_is_one_line_with_the_diff_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = make_project(tmp_path / "calc")
    with mounted_read_only(source, tmp_path / "mounted") as project:
        code, _ = solve(tmp_path, project, scripted([FIX]), "--apply")
    captured = capsys.readouterr()
    assert code == 2 and "a/calc.py" in captured.out  # the diff, to apply by hand
    assert "Read-only" in captured.err.strip().splitlines()[-1], captured.err
    assert "Traceback" not in captured.err
    assert (source / "calc.py").read_text() == BUGGY
