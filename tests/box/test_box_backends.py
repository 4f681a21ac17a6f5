"""The box without bubblewrap (util-linux unshare), its policy and its home: held-out attacks,
each through a `python_tests` candidate, whose verdict must stay honest on either backend.

Held-out attacks, each through a `python_tests` candidate, whose verdict is what the model
would see: a file written into the host's /tmp, a socket to a server on the host, and the
API key that `--api-key` put on mulligan's own command line, read from /proc/*/cmdline and
returned into the verdict. They run under whichever backend is in force (`.ci/run` runs this
file under MULLIGAN_SANDBOX=unshare and MULLIGAN_SANDBOX=bwrap); every attack also shows it
really ran, so a box that runs nothing cannot pass."""

from __future__ import annotations

import ast
import json
import marshal
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

import pytest

from mulligan import sandbox
from mulligan.evaluator import Evaluator
from mulligan.sandbox import Policy
from mulligan.sandbox.plan import BOX_INIT, make_plan, unshare_argv
from mulligan.schema import Attempt, CommandCheck, PythonTestsCheck, Task
from tests.box.test_sandbox import fresh_containment
from tests.helpers.boxing import fenced, host_paths, loopback_listener, run_check

IS_ROOT = os.geteuid() == 0
NAMESPACES = sandbox.containment().level == "namespaces"
ADD_TESTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4\n"
__all__ = ["fresh_containment", "host_paths"]  # fixtures shared with the neighbouring tests


def token() -> str:
    return secrets.token_hex(6)


def test_a_candidate_writing_into_the_hosts_tmp_leaves_nothing_there(
    host_paths: list[Path],
) -> None:
    target = Path("/tmp") / f"mulligan-held-out-{token()}"
    host_paths.append(target)
    code = (
        "def add(a, b):\n"
        f"    with open({str(target)!r}, 'w') as handle:\n"
        "        handle.write('planted')\n"
        f"    return 'WROTE ' + open({str(target)!r}).read()\n"
    )
    result = run_check(PythonTestsCheck(tests=ADD_TESTS, entry_point="add"), fenced(code))
    assert "WROTE planted" in result.detail, result.detail  # it ran, and wrote in its own /tmp
    assert not os.path.lexists(target)


def test_a_candidate_cannot_reach_a_server_on_the_host() -> None:
    with loopback_listener() as listener:
        code = (
            "import socket\n"
            "def add(a, b):\n"
            "    try:\n"
            f"        socket.create_connection(('127.0.0.1', {listener.port}), timeout=2).close()\n"
            "        return a + b\n"
            "    except OSError as exc:\n"
            "        return 'BLOCKED ' + type(exc).__name__\n"
        )
        result = run_check(PythonTestsCheck(tests=ADD_TESTS, entry_point="add"), fenced(code))
    assert "BLOCKED" in result.detail, result.detail
    assert not result.passed and listener.accepted == 0


STEAL_THE_KEY = """
import os
def add(a, b):
    scanned = 0
    for entry in os.listdir("/proc"):
        try:
            words = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        scanned += 1
        if b"--api-key" in words:
            return "KEY " + words[words.index(b"--api-key") + 1].decode()
    return f"SCANNED {scanned}"
"""
EVALUATE = """
import json, sys
from mulligan.evaluator import Evaluator
from mulligan.schema import Attempt, PythonTestsCheck, Task
task = Task(id="t", prompt="p", checks=[PythonTestsCheck(tests=sys.argv[1], entry_point="add")])
verdict = Evaluator().evaluate(task, Attempt(task_id="t", answer=sys.argv[2]))
print(json.dumps({"feedback": verdict.feedback, "detail": verdict.checks[0].detail}))
"""


def test_the_api_key_on_mulligans_command_line_never_reaches_a_verdict() -> None:
    key = f"sk-{token()}"
    argv = [sys.executable, "-c", EVALUATE, ADD_TESTS, fenced(STEAL_THE_KEY), "--api-key", key]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
    verdict = json.loads(done.stdout)
    assert "SCANNED" in verdict["detail"], verdict  # it ran and looked through /proc
    assert key not in done.stdout + done.stderr


# ---------------------------------------------------------------- the policy is passed in

READ = "try:\n    print(open({path!r}).read())\nexcept OSError as exc:\n    print('refused', type(exc).__name__)\n"


def test_a_policy_covers_its_paths_for_its_own_runs_only(tmp_path: Path) -> None:
    answer = tmp_path / "answer.txt"
    answer.write_text("forty-two")
    tmp_path.chmod(0o755)
    code = READ.format(path=str(answer))
    covered = sandbox.run_python(code, cwd=tmp_path, policy=Policy().hiding(answer))
    uncovered = sandbox.run_python(code, cwd=tmp_path)
    if NAMESPACES:
        assert "forty-two" in uncovered.stdout, uncovered.describe()  # readable without it
        assert "forty-two" not in covered.stdout, covered.describe()
    else:
        assert "hidden paths" in sandbox.containment().missing


def test_hide_still_covers_every_later_run(tmp_path: Path) -> None:
    from mulligan.sandbox.policy import clear_shared

    answer = tmp_path / "answer.txt"
    answer.write_text("forty-two")
    tmp_path.chmod(0o755)
    sandbox.hide(answer)
    try:
        run = sandbox.run_python(READ.format(path=str(answer)), cwd=tmp_path, policy=Policy())
        assert "forty-two" not in run.stdout or not NAMESPACES, run.describe()
        assert str(answer.resolve()) in sandbox.shared_policy().hidden
    finally:
        clear_shared()


# ---------------------------------------------------------------- the user's toolchain


@pytest.fixture
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of mode 700 with a venv in it on PATH, and a secret next to the venv."""
    home = tmp_path / "home"
    home.mkdir()
    base = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", str(home / "proj" / "venv")], check=True)
    assert venv  # the standard library's venv module is what made it
    (home / ".local" / "bin").mkdir(parents=True)
    greet = home / ".local" / "bin" / "greet"
    greet.write_text("#!/bin/sh\necho hello from the toolchain\n")
    greet.chmod(0o755)
    (home / "secret.txt").write_text("the user's own notes")
    (home / "secret.txt").chmod(0o644)
    home.chmod(0o700)
    monkeypatch.setenv("HOME", str(home))
    path = f"{home / 'proj' / 'venv' / 'bin'}:{home / '.local' / 'bin'}:{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    return home


TOOLCHAIN = 'python -c "import sys; print(sys.prefix)" && greet'


def test_a_check_finds_the_interpreter_under_a_private_home(
    private_home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    task = Task(id="t", prompt="p", checks=[CommandCheck(command=TOOLCHAIN, timeout=20)])
    verdict = Evaluator().evaluate(task, Attempt(task_id="t", answer=""), ws)
    detail = verdict.checks[0].detail
    if NAMESPACES or not IS_ROOT:
        assert verdict.passed, detail
        assert (
            str(private_home / "proj" / "venv") in detail and "hello from the toolchain" in detail
        )
    else:  # limits only, as root: the run's uid cannot pass a mode-700 home; said, not hidden
        assert not verdict.passed and "Permission denied" in detail, detail
        assert "cannot pass" in caplog.text and str(private_home.parent) in caplog.text


def test_the_rest_of_the_home_stays_out_of_the_box(private_home: Path) -> None:
    run = sandbox.run_shell(f"ls -a {private_home}; cat {private_home}/secret.txt; echo done")
    assert "done" in run.stdout, run.describe()
    if NAMESPACES:
        assert "the user's own notes" not in run.stdout + run.stderr, run.describe()
        assert set(run.stdout.split()) >= {"proj", ".local"} and "secret.txt" not in run.stdout
    else:
        assert any("a home of its own" in gap for gap in sandbox.containment().missing)


@pytest.mark.parametrize("tool", ["shell", "python"])
def test_the_shell_and_python_tools_find_the_toolchain(
    tool: str, private_home: Path, tmp_path: Path
) -> None:
    from mulligan.actor import ToolRegistry, build_tools
    from mulligan.schema import ToolCall

    registry = ToolRegistry.of(
        build_tools([tool], workspace=tmp_path, scratch_workspace=True), approve=lambda c: True
    )
    if tool == "shell":
        arguments = {"command": TOOLCHAIN}
    else:
        arguments = {"code": f"import subprocess\nsubprocess.run({TOOLCHAIN!r}, shell=True)"}
    result = registry.run(ToolCall(id="c", name=tool, arguments=json.dumps(arguments)))
    if NAMESPACES or not IS_ROOT:
        assert "hello from the toolchain" in result.output, result.output
        assert str(private_home / "proj" / "venv") in result.output, result.output
    else:
        assert "Permission denied" in result.output, result.output


def test_the_shell_tool_starts_in_a_closed_workspace(tmp_path: Path) -> None:
    """A caller's project of mode 700 below another (as pytest's own tmp_path): the run
    starts in it under either backend, as bubblewrap's --chdir does before the drop to the
    run's user."""
    from mulligan.actor import ToolRegistry
    from mulligan.actor.builtin_tools import Workspace
    from mulligan.schema import ToolCall

    closed = tmp_path / "closed"
    project = closed / "project"
    project.mkdir(parents=True)
    project.chmod(0o700)
    closed.chmod(0o700)
    registry = ToolRegistry.of(Workspace(project).tools(), approve=lambda c: True)
    said = registry.run(ToolCall(id="c", name="shell", arguments='{"command": "echo started"}'))
    assert (said.status, said.output) == ("ok", "started")


def test_mulligan_installed_under_tmp_still_runs_its_checks(host_paths: list[Path]) -> None:
    """A venv under /tmp (a clone there, installed), on a path anyone may pass: the box's
    fresh /tmp must not take the interpreter away, or every check ends with exit 127."""
    top = Path(tempfile.mkdtemp(prefix="mulligan-venv-", dir="/tmp"))
    top.chmod(0o755)
    prefix = top / "venv"
    (prefix / "bin").mkdir(parents=True)
    real = os.path.realpath(sys.executable)
    (prefix / "bin" / "python").symlink_to(real)
    (prefix / "pyvenv.cfg").write_text(f"home = {os.path.dirname(real)}\n")
    code = (
        f"import sys; sys.path[:0] = {[p for p in sys.path if p]!r}\n"
        "from mulligan import sandbox\n"
        f"assert sys.prefix == {str(prefix)!r}, sys.prefix\n"
        "run = sandbox.run_python('print(6 * 7)')\n"
        "print(run.describe())\n"
    )
    said = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=120
    )
    shutil.rmtree(top)
    assert said.returncode == 0, said.stderr
    assert said.stdout.strip().splitlines()[0] == "42", said.stdout


def test_a_toolchain_under_tmp_on_path_is_found_in_the_box(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A venv the user made under /tmp (on a path anyone may pass) and put on PATH: the box's
    fresh /tmp must not take it away, under either backend; the rest of /tmp stays out."""
    top = Path(tempfile.mkdtemp(prefix="mulligan-tool-", dir="/tmp"))
    try:
        top.chmod(0o755)
        prefix = top / "venv"
        (prefix / "bin").mkdir(parents=True)
        (prefix / "pyvenv.cfg").write_text(f"home = {os.path.dirname(sys.executable)}\n")
        tool = prefix / "bin" / "greet-from-tmp"
        tool.write_text("#!/bin/sh\necho hello from /tmp\n")
        tool.chmod(0o755)
        (top / "notes.txt").write_text("not the box's to read")
        monkeypatch.setenv("PATH", f"{prefix / 'bin'}:{os.environ['PATH']}")
        run = sandbox.run_shell(f"greet-from-tmp; cat {top}/notes.txt; echo done")
    finally:
        shutil.rmtree(top)
    assert "hello from /tmp" in run.stdout, run.describe()
    if NAMESPACES:
        assert "not the box's to read" not in run.stdout, run.describe()


# ---------------------------------------------------------------- which backend, said


@pytest.mark.parametrize("wanted", ["unshare", "rlimits"])
def test_doctor_names_the_backend_in_force_and_what_it_lacks(
    wanted: str,
    fresh_containment: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_local_model: None,
) -> None:
    from mulligan.cli import main

    fresh_containment.setenv("MULLIGAN_SANDBOX", wanted)
    main(["doctor", "--memory", str(tmp_path), "--embedding", "hash"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "containment:" in ln)
    if wanted == "unshare":
        assert line.startswith("ok   containment: namespaces through util-linux unshare"), line
    else:
        assert line.startswith("FAIL containment: limits only"), line
        assert "network isolation" in line and "hidden paths" in line


def test_signalling_the_boxs_init_does_not_end_the_run_early() -> None:
    if not NAMESPACES:
        pytest.skip("without namespaces pid 1 is the host's init: no signal is sent to it")
    run = sandbox.run_shell("kill -INT 1; kill -TERM 1; kill -KILL 1; sleep 0.3; echo alive")
    assert run.ok and "alive" in run.stdout, run.describe()


WRITE = """
import os
for path in {paths!r}:
    try:
        with open(path, "w") as handle:
            handle.write("planted")
        print("wrote", path)
    except OSError as exc:
        print("refused", path, type(exc).__name__)
"""


def test_the_remount_path_of_older_kernels_keeps_the_host_read_only(
    tmp_path: Path, host_paths: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before Linux 5.12 there is no `mount_setattr`: box_init remounts mount by mount."""
    from mulligan.sandbox.plan import REMOUNT_VARIABLE

    if sandbox.containment().backend != "unshare":
        pytest.skip("the remount path belongs to the unshare backend (MULLIGAN_SANDBOX=unshare)")
    monkeypatch.setenv(REMOUNT_VARIABLE, "1")
    outside = [Path(d) / f"mulligan-remount-{token()}" for d in ("/tmp", "/var/tmp", "/dev/shm")]
    outside += [Path(__file__).parent / f"mulligan-remount-{token()}"]
    host_paths += outside
    ws = tmp_path / "ws"
    ws.mkdir()
    paths = [str(p) for p in outside] + ["inside.txt"]
    run = sandbox.run_python(WRITE.format(paths=paths), cwd=ws, writable=True)
    assert "wrote inside.txt" in run.stdout, run.describe()
    assert (ws / "inside.txt").read_text() == "planted"
    assert [p for p in outside if os.path.lexists(p)] == []
    assert f"refused {outside[-1]}" in run.stdout, run.describe()  # the host is read-only


def test_box_init_reads_nothing_the_unshare_backend_does_not_give_it() -> None:
    """box_init reads the plan by the plan's own field names: every key it reads is in what
    the unshare backend hands it (a field renamed on one side only would fail just inside a
    box, on hosts without bubblewrap, where the box's init can say no more than a KeyError)."""
    plan = make_plan("/tmp/s", "/tmp/w", True, sandbox.Limits(), None, Policy(toolchain=False))
    argv = unshare_argv(["/bin/true"], plan)
    given = marshal.loads(bytes.fromhex(argv[argv.index(str(BOX_INIT)) + 1]))
    read = {
        node.slice.value
        for node in ast.walk(ast.parse(BOX_INIT.read_text(encoding="utf-8")))
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "spec"
        and isinstance(node.slice, ast.Constant)
    }
    assert "memory_bytes" in read  # the reads were found
    assert read - set(given) == set()


LOOPBACK = """
import socket
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
client = socket.create_connection(server.getsockname(), timeout=5)
conn, _ = server.accept()
conn.sendall(b"over the box's own loopback")
print(client.recv(64).decode())
"""


def test_the_boxs_own_loopback_works() -> None:
    """No network, but a loopback that is up: a check may start a server and talk to it."""
    run = sandbox.run_python(LOOPBACK)
    assert "over the box's own loopback" in run.stdout, run.describe()
