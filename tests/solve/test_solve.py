"""`mulligan solve`: each attempt in a fresh copy with the user's directory untouched, --apply
writes the passing diff, a project's lessons reach later solves, and diffs round-trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.solve.diffs import apply_diff, unified_diff
from mulligan.testing import FakeOpenAIServer, FakeReply

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a * b\n"
TEST = "from calc import add\n\nassert add(2, 3) == 5, f'add(2, 3) = {add(2, 3)}'\nprint('ok')\n"
CHECK = "python3 test_calc.py"
LESSON = "Read calc.py before editing: add() must return the sum a + b."


def make_project(root: Path, git: bool = False) -> Path:
    root.mkdir()
    (root / "calc.py").write_text(BUGGY)
    (root / "test_calc.py").write_text(TEST)
    if git:
        (root / ".gitignore").write_text("build/\n")
        for command in (
            ["git", "init", "-q"],
            ["git", "add", "-A"],
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"],
        ):
            subprocess.run(command, cwd=root, check=True)
    return root


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def knows_the_lesson(body: dict[str, Any]) -> bool:
    return any(LESSON in str(m.get("content")) for m in body["messages"])


def solver(
    fix: Callable[[dict[str, Any]], bool],
    first_turn: Callable[[dict[str, Any], bool], list[dict[str, Any]]] | None = None,
) -> Callable[[dict[str, Any]], FakeReply]:
    """Reflector writes LESSON; the actor fixes calc.py when `fix(body)`, else breaks it."""

    def policy(body: dict[str, Any]) -> FakeReply:
        messages = body["messages"]
        opening = str(messages[0]["content"])
        if "You review a failed attempt" in opening:
            # this attempt's diagnosis (it quotes the lesson) and the general lesson
            reflection = {"diagnosis": f"The check failed. {LESSON}", "lesson": LESSON, "tags": []}
            return FakeReply(content=json.dumps(reflection))
        if opening.startswith("An agent failed a task"):
            return FakeReply(content=json.dumps({"diagnosis": "", "lesson": ""}))
        turn = sum(1 for m in messages if m["role"] == "assistant")
        good = fix(body)
        if turn == 0 and first_turn is not None:
            return FakeReply(content=None, tool_calls=first_turn(body, good))
        if messages[-1]["role"] != "tool" or (first_turn is not None and turn == 1):
            content = FIXED if good else WRONG
            return FakeReply(
                content=None, tool_calls=[call("write_file", path="calc.py", content=content)]
            )
        return FakeReply(content="I changed add() in calc.py.")

    return policy


def solve_args(server: FakeOpenAIServer, project: Path, memory: Path, *extra: str) -> list[str]:
    return [
        "solve",
        "make the test pass",
        "--check",
        CHECK,
        "--dir",
        str(project),
        "--base-url",
        server.base_url,
        "--memory",
        str(memory),
        "--embedding",
        "hash",
        "--protocol",
        "native",  # the fake server sends tool calls natively (a loopback default is text)
        *extra,
    ]


def tool_outputs(server: FakeOpenAIServer) -> list[str]:
    """Every tool result the model was shown, in order of the requests that first carried it."""
    seen: list[str] = []
    for body in server.requests:
        for message in body["messages"]:
            if message["role"] == "tool" and message["content"] not in seen:
                seen.append(message["content"])
    return seen


def test_each_attempt_works_in_a_fresh_copy_and_dir_is_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")

    def look_around(body: dict[str, Any], good: bool) -> list[dict[str, Any]]:
        if good:  # the second attempt looks at its copy first
            return [call("list_files"), call("read_file", path="calc.py")]
        return [call("write_file", path="scratch.txt", content="attempt one was here")]

    with FakeOpenAIServer(policy=solver(knows_the_lesson, look_around)) as server:
        code = main(solve_args(server, project, tmp_path / "mem", "--trials", "2"))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    listing, original = tool_outputs(server)[2:4]
    assert "scratch.txt" not in listing and "calc.py" in listing  # attempt 1's copy is gone
    assert original == BUGGY  # attempt 2 starts from DIR, not from attempt 1's edits
    assert "-    return a - b\n+    return a + b\n" in captured.out
    assert "scratch.txt" not in captured.out  # the passing attempt's own changes only
    assert "attempt 1  score 0.00" in captured.err and "PASS attempt 2" in captured.err
    assert "not applied" in captured.err
    assert (project / "calc.py").read_text() == BUGGY
    assert sorted(p.name for p in project.iterdir()) == ["calc.py", "test_calc.py"]


def test_apply_writes_the_passing_diff_to_a_git_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc", git=True)
    (project / "notes.md").write_text("untracked, not ignored\n")

    def also_build(body: dict[str, Any], good: bool) -> list[dict[str, Any]]:
        return [call("write_file", path="build/out.txt", content="ignored by .gitignore")]

    memory = project / ".mulligan"  # inside the project: neither copied nor a change to DIR
    with FakeOpenAIServer(policy=solver(lambda body: True, also_build)) as server:
        code = main(solve_args(server, project, memory, "--apply", "--trials", "1"))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "build/out.txt" not in captured.out and ".mulligan" not in captured.out
    assert (project / "calc.py").read_text() == FIXED
    assert not (project / "build").exists()
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    assert status.stdout.strip() == "M calc.py"
    assert subprocess.run(["python3", "test_calc.py"], cwd=project).returncode == 0
    # the printed diff is the one git would apply to the original
    subprocess.run(["git", "stash", "-q"], cwd=project, check=True)
    applied = subprocess.run(
        ["git", "apply", "--check", "-"], cwd=project, input=captured.out.encode()
    )
    assert applied.returncode == 0


def test_apply_is_refused_when_dir_changed_during_the_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")

    def user_edits(body: dict[str, Any], good: bool) -> list[dict[str, Any]]:
        (project / "README").write_text("the user kept working\n")
        return [call("read_file", path="calc.py")]

    with FakeOpenAIServer(policy=solver(lambda body: True, user_edits)) as server:
        code = main(solve_args(server, project, tmp_path / "mem", "--apply", "--trials", "1"))
    captured = capsys.readouterr()
    assert code == 2
    assert "+    return a + b" in captured.out  # the diff is still shown
    assert "changed since attempt 1 began; not applied" in captured.err
    assert "README" in captured.err.strip().splitlines()[-1]  # what changed is named
    assert "Traceback" not in captured.err
    assert (project / "calc.py").read_text() == BUGGY
    assert (project / "README").read_text() == "the user kept working\n"


def test_no_passing_attempt_exits_1_and_episodes_show_each_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    memory = tmp_path / "mem"
    with FakeOpenAIServer(policy=solver(lambda body: False)) as server:
        code = main(solve_args(server, project, memory, "--trials", "2", "--strategy", "reflexion"))
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""
    assert "no attempt passed · 2 attempt(s)" in captured.err
    assert "add(2, 3) = 6" in captured.err  # what the check printed
    assert (project / "calc.py").read_text() == BUGGY
    run_id = captured.err.split("run id: ")[1].split()[0]
    assert (
        main(
            [
                "episodes",
                "show",
                f"{run_id}:reflexion:solve-make-the-test-pass",
                "--memory",
                str(memory),
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    assert shown.count("changes:\ndiff --git a/calc.py b/calc.py") == 2
    assert "+    return a * b" in shown


def test_a_lesson_reaches_a_later_solve_as_every_command_shows_it(tmp_path: Path) -> None:
    """Same agent, two sessions: the second process's first attempt sees no unverified
    lesson (as in `run`), unless --show-candidates says so; then it starts with it."""
    project = make_project(tmp_path / "calc")
    memory = tmp_path / "mem"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}

    def solve(server: FakeOpenAIServer, *more: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "mulligan.cli", *solve_args(server, project, memory)]
        return subprocess.run(
            argv + list(more), capture_output=True, text=True, env=env, timeout=300
        )

    with FakeOpenAIServer(policy=solver(knows_the_lesson)) as server:
        first = solve(server, "--trials", "2")
    assert first.returncode == 0, first.stderr
    assert "PASS attempt 2" in first.stderr
    with FakeOpenAIServer(policy=solver(knows_the_lesson)) as server:
        plain = solve(server, "--trials", "1")
        assert not knows_the_lesson(server.requests[0])
    assert plain.returncode == 1 and "attempt 1 was given" not in plain.stderr
    with FakeOpenAIServer(policy=solver(knows_the_lesson)) as server:
        second = solve(server, "--trials", "1", "--show-candidates")
        assert knows_the_lesson(server.requests[0])
    assert second.returncode == 0, second.stderr
    assert f"attempt 1 was given: {LESSON}\nPASS attempt 1" in second.stderr
    assert (project / "calc.py").read_text() == BUGGY


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["fix it", "--dir", "."], "at least one --check"),
        (
            ["fix it", "--check", "true", "--dir", "no/such/dir"],
            "--dir no/such/dir: not a directory",
        ),
        (["fix it", "--check", "true", "--strategy", "best"], "unknown strategy 'best'"),
        (
            ["fix it", "--check", "true", "--trials", "0"],
            "--trials 0: must be a whole number at least 1",
        ),
        (
            ["fix it", "--check", "true", "--check-timeout", "1e6"],
            "--check-timeout 1000000.0: must be a number of seconds above 0 and at most 86400",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    arguments: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["solve", *arguments, "--memory", str(tmp_path / "mem")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_diff_round_trip_keeps_missing_newlines_and_deletions(tmp_path: Path) -> None:
    before = {"a.txt": b"one\ntwo", "gone.txt": b"bye\n", "crlf.txt": b"x\r\ny\r\n"}
    after = {"a.txt": b"one\n2\n", "new/b.txt": b"fresh", "crlf.txt": b"x\r\nz\r\n"}
    for name, content in before.items():
        (tmp_path / name).write_bytes(content)
    diff = unified_diff(before, after)
    assert "\\ No newline at end of file" in diff and "deleted file mode" in diff
    assert (
        subprocess.run(
            ["git", "apply", "--check", "-"], cwd=tmp_path, input=diff.encode()
        ).returncode
        == 0
    )
    applied = apply_diff(diff, tmp_path)
    assert sorted(applied) == ["a.txt", "crlf.txt", "gone.txt", "new/b.txt"]
    now = {
        p.relative_to(tmp_path).as_posix(): p.read_bytes()
        for p in tmp_path.rglob("*")
        if p.is_file()
    }
    assert now == after


def test_a_diff_that_does_not_match_changes_nothing(tmp_path: Path) -> None:
    from mulligan.errors import UserError

    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / "b.txt").write_text("changed by the user\n")
    diff = unified_diff(
        {"a.txt": b"one\n", "b.txt": b"two\n"}, {"a.txt": b"ONE\n", "b.txt": b"three\n"}
    )
    with pytest.raises(UserError, match="b.txt: the diff does not apply"):
        apply_diff(diff, tmp_path)
    assert (tmp_path / "a.txt").read_text() == "one\n"  # all or nothing


def test_a_killed_solve_resumes_where_it_stopped(tmp_path: Path) -> None:
    import signal
    import time

    project = make_project(tmp_path / "calc")
    memory = tmp_path / "mem"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    base = solver(lambda body: False)

    def stall_at_reflection(body: dict[str, Any]) -> FakeReply:
        if "You review a failed attempt" in str(body["messages"][0]["content"]):
            return FakeReply(content="{}", delay=60)  # attempt 1 is logged; killed here
        return base(body)

    with FakeOpenAIServer(policy=stall_at_reflection) as server:
        argv = [sys.executable, "-m", "mulligan.cli", *solve_args(server, project, memory)]
        killed = subprocess.Popen(
            argv + ["--trials", "2"], stderr=subprocess.PIPE, text=True, env=env
        )
        deadline = time.monotonic() + 120
        while not any("You review" in str(b["messages"][0]["content"]) for b in server.requests):
            assert time.monotonic() < deadline and killed.poll() is None
            time.sleep(0.1)
        killed.send_signal(signal.SIGKILL)
        _, err = killed.communicate()
    run_id = err.split("run id: ")[1].split()[0]
    with FakeOpenAIServer(policy=solver(lambda body: True)) as server:
        argv = [sys.executable, "-m", "mulligan.cli", *solve_args(server, project, memory)]
        resumed = subprocess.run(
            argv + ["--trials", "2", "--resume", run_id],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
    assert resumed.returncode == 0, resumed.stderr
    assert "PASS attempt 2" in resumed.stderr and "attempt 1" not in resumed.stderr
    assert "passed on attempt 2 · 2 attempt(s)" in resumed.stderr
    assert "+    return a + b" in resumed.stdout


def test_an_unknown_tool_is_refused_before_any_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    with FakeOpenAIServer([]) as server:
        code = main(solve_args(server, project, tmp_path / "mem", "--tools", "telepathy"))
        assert server.requests == []
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "telepathy (unknown)" in err[-1]
    assert (project / "calc.py").read_text() == BUGGY


def test_a_directory_a_parent_repository_ignores_is_copied_whole(tmp_path: Path) -> None:
    from mulligan.solve.copies import Project

    (tmp_path / ".gitignore").write_text("*\n")  # e.g. a home directory kept in git
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    project = make_project(tmp_path / "calc")
    assert sorted(Project(project).snapshot()) == ["calc.py", "test_calc.py"]
    tracked = make_project(tmp_path / "repo", git=True)
    (tracked / "build").mkdir()
    (tracked / "build" / "x").write_text("ignored")
    assert sorted(Project(tracked).snapshot()) == [".gitignore", "calc.py", "test_calc.py"]


def test_solve_resume_with_other_settings_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`solve --resume` runs the same resume check as run and bench (it used to run none)."""
    project = make_project(tmp_path / "calc")
    memory = tmp_path / "mem"
    with FakeOpenAIServer(policy=solver(lambda body: True)) as server:
        assert main(solve_args(server, project, memory, "--trials", "2", "--yes")) == 0
        run_id = capsys.readouterr().err.split("run id: ")[1].split()[0]
        asked = len(server.requests)
        again = solve_args(server, project, memory, "--trials", "3", "--yes", "--resume", run_id)
        assert main(again) == 2
        err = capsys.readouterr().err
        assert "trials" in err and run_id in err
        assert len(server.requests) == asked
