"""Escapes from the box: the network, host directories, files a run plants for the next, other
processes, secrets; each attack checks that the host is unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from mulligan import sandbox
from mulligan.actor import ToolRegistry, build_tools
from mulligan.runs.build import box_policy
from mulligan.sandbox import Limits
from mulligan.schema import (
    PythonTestsCheck,
    ToolCall,
)
from tests.helpers.boxing import (
    IS_ROOT,
    REPO,
    RUNNERS,
    Runner,
    assert_no_leak,
    fenced,
    host_paths,
    loopback_listener,
    processes_with,
    python_in_shell,
    run_check,
    runner,
    token,
    workspace,
)
from tests.helpers.forgeries import ADD_CHECK

__all__ = ["host_paths", "workspace", "runner"]  # fixtures from tests/helpers/boxing.py


# ---------------------------------------------------------------- 2. host isolation

CONNECT = """
import socket
print("attempting")
try:
    sock = socket.create_connection(("127.0.0.1", {port}), timeout=3)
    print("CONNECTED", sock.recv(16))
except OSError as exc:
    print("blocked:", type(exc).__name__)
print("interfaces:", sorted(name for _, name in socket.if_nameindex()))
"""


def test_network_is_off_by_default(runner: Runner, workspace: Path) -> None:
    with loopback_listener() as listener:
        output = runner(CONNECT.format(port=listener.port), workspace)
    assert "attempting" in output, output
    assert "CONNECTED" not in output and "blocked:" in output, output
    assert listener.accepted == 0
    assert "interfaces: ['lo']" in output, output  # nothing but a loopback of its own


@pytest.mark.parametrize("run", ["python", "shell"])
def test_network_can_be_allowed(run: str) -> None:
    limits = Limits(network=True)
    with loopback_listener() as listener:
        code = CONNECT.format(port=listener.port)
        if run == "python":
            output = sandbox.run_python(code, limits=limits).stdout
        else:
            output = sandbox.run_shell(python_in_shell(code), limits=limits).stdout
    assert "CONNECTED b'hello'" in output, output
    assert listener.accepted == 1


def test_a_python_tests_candidate_is_boxed_too(host_paths: list[Path]) -> None:
    # The candidate's answer is right only if it reached the network or planted a host file.
    planted = Path("/tmp") / f"mulligan-attack-{token()}"
    host_paths.append(planted)
    with loopback_listener() as listener:
        code = (
            "import socket\n"
            "def add(a, b):\n"
            "    escaped = 0\n"
            "    try:\n"
            f"        socket.create_connection(('127.0.0.1', {listener.port}), timeout=2).close()\n"
            "        escaped += 1\n"
            "    except OSError:\n"
            "        pass\n"
            "    try:\n"
            f"        open({str(planted)!r}, 'w').write('x')\n"
            "    except OSError:\n"
            "        pass\n"
            "    return a + b if escaped else 0\n"
        )
        result = run_check(PythonTestsCheck(tests=ADD_CHECK, entry_point="add"), fenced(code))
    assert not result.passed, result.detail
    assert listener.accepted == 0
    assert not os.path.lexists(planted)


WRITE_EVERYWHERE = """
for path in {paths!r}:
    try:
        with open(path, "w") as handle:
            handle.write("planted")
        print("wrote", path)
    except OSError as exc:
        print("refused", path, type(exc).__name__)
print("done")
"""


def test_writes_to_host_temp_directories_stay_in_the_box(
    runner: Runner, workspace: Path, host_paths: list[Path]
) -> None:
    name = f"mulligan-attack-{token()}"
    host_paths += [Path(d) / name for d in ("/tmp", "/var/tmp", "/dev/shm")]
    output = runner(WRITE_EVERYWHERE.format(paths=[str(p) for p in host_paths]), workspace)
    assert "done" in output, output
    assert [p for p in host_paths if os.path.lexists(p)] == []


def test_writes_outside_the_workspace_fail(
    runner: Runner, workspace: Path, host_paths: list[Path]
) -> None:
    name = f"mulligan-attack-{token()}"
    host_paths += [
        workspace.parent / name,  # next to the workspace
        Path.home() / name,
        REPO / name,  # mulligan's own checkout
        REPO / "tests" / name,
    ]
    output = runner(WRITE_EVERYWHERE.format(paths=[str(p) for p in host_paths]), workspace)
    assert "done" in output, output
    assert [p for p in host_paths if os.path.lexists(p)] == []


@pytest.mark.parametrize("run", ["python_tool", "shell_tool", "command_check"])
def test_the_workspace_is_still_writable(run: str, workspace: Path) -> None:
    # The other side of the coin: a task's own scratch workspace must stay usable.
    name = f"result-{token()}.txt"  # relative: the code runs in the workspace
    output = RUNNERS[run](WRITE_EVERYWHERE.format(paths=[name]), workspace)
    assert f"wrote {name}" in output, output
    assert (workspace / name).read_text() == "planted"


OWN_TEMP = """
import os
for directory in ("/tmp", "/var/tmp"):
    path = os.path.join(directory, {name!r})
    with open(path, "w") as handle:
        handle.write("scratch data")
    print("read back", open(path).read())
    os.unlink(path)
"""


def test_the_box_has_a_writable_temp_directory_of_its_own(
    runner: Runner, workspace: Path, host_paths: list[Path]
) -> None:
    # Programs write to /tmp without asking TMPDIR; the box gives them one, not the host's.
    name = f"mulligan-own-{token()}"
    host_paths += [Path("/tmp") / name, Path("/var/tmp") / name]
    output = runner(OWN_TEMP.format(name=name), workspace)
    assert output.count("read back scratch data") == 2, output
    assert [p for p in host_paths if os.path.lexists(p)] == []


@pytest.mark.parametrize("tool", ["python", "shell"])
def test_a_users_own_workspace_is_read_only_to_the_tools(tool: str, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("mine")
    registry = ToolRegistry.of(
        build_tools([tool], workspace=workspace, scratch_workspace=False),
        approve=lambda call: True,
    )
    code = WRITE_EVERYWHERE.format(paths=["notes.txt", "new.txt"])
    arguments = {"code": code} if tool == "python" else {"command": python_in_shell(code)}
    result = registry.run(ToolCall(id="c", name=tool, arguments=json.dumps(arguments)))
    assert "done" in result.output, result.output
    assert (workspace / "notes.txt").read_text() == "mine"
    assert not (workspace / "new.txt").exists()


READ_BACK = """
import os
for path in {paths!r}:
    try:
        if os.path.isdir(path):
            for name in os.listdir(path):
                print(open(os.path.join(path, name)).read())
        else:
            print(open(path).read())
    except OSError as exc:
        print("refused", path, type(exc).__name__)
print("done")
"""


def test_hidden_paths_are_covered_in_the_box(host_paths: list[Path]) -> None:
    """Answers on the host (datasets, mulligan's memory) that `sandbox.hide` covers stay unread."""
    if not IS_ROOT:
        pytest.skip("needs root to make a world-readable file outside the box's private /tmp")
    secret = f"ANSWER-{token()}"
    answers = Path("/run") / f"mulligan-answers-{token()}.txt"
    directory = Path("/run") / f"mulligan-memory-{token()}"
    host_paths += [answers, directory / "lessons.txt"]
    answers.write_text(secret)
    directory.mkdir()
    (directory / "lessons.txt").write_text(secret)
    try:
        for path in (answers, directory, directory / "lessons.txt"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        code = READ_BACK.format(paths=[str(answers), str(directory)])
        sandbox.hide(answers)
        sandbox.hide(directory)
        output = sandbox.run_python(code).describe()
        assert "done" in output, output
        assert secret not in output, output
    finally:
        with suppress(OSError):
            (directory / "lessons.txt").unlink()
        with suppress(OSError):
            directory.rmdir()


def test_the_api_key_in_mulligan_toml_is_not_readable_in_the_box(host_paths: list[Path]) -> None:
    """A project's mulligan.toml (often world-readable) holds the API key; the box must not read it."""
    from mulligan.settings.loading import load_config

    if not IS_ROOT:
        pytest.skip("needs root to make a world-readable file outside the box's private /tmp")
    key = f"sk-{token()}"
    project = Path("/run") / f"mulligan-project-{token()}"
    config = project / "mulligan.toml"
    host_paths.append(config)
    project.mkdir()
    try:
        project.chmod(0o755)
        config.write_text(f'api_key = "{key}"\n')
        config.chmod(0o644)
        loaded = load_config({}, config_path=config)
        assert loaded.endpoint.api_key == key
        code = READ_BACK.format(paths=[str(config)])
        output = sandbox.run_python(code, policy=box_policy(loaded)).describe()
        assert "done" in output, output
        assert key not in output, output
        # the policy is what covers it: a run without it (proving the attack) reads the key
        assert key in sandbox.run_python(code).describe()
    finally:
        with suppress(OSError):
            config.unlink()
        with suppress(OSError):
            project.rmdir()


PLANT = """
for path in {paths!r}:
    try:
        with open(path, "w") as handle:
            handle.write("hidden tests")
    except OSError:
        pass
print("planted")
"""
LOOK = """
import os
for path in {paths!r}:
    if os.path.exists(path):
        print("SEEN", path)
print("looked")
"""


def test_a_file_planted_by_one_run_is_not_seen_by_the_next(
    runner: Runner, tmp_path: Path, host_paths: list[Path]
) -> None:
    name = f"mulligan-plant-{token()}"
    host_paths += [Path(d) / name for d in ("/tmp", "/var/tmp", "/dev/shm")]
    paths = [str(p) for p in host_paths]
    first, second = tmp_path / "trial1", tmp_path / "trial2"
    first.mkdir()
    second.mkdir()
    assert "planted" in runner(PLANT.format(paths=paths), first)
    output = runner(LOOK.format(paths=paths), second)
    assert "looked" in output, output
    assert "SEEN" not in output, output
    assert [p for p in host_paths if os.path.lexists(p)] == []


FIND_IN_PROC = """
import os
needle = {backwards!r}[::-1].encode()
scanned, found = 0, []
if needle in repr(dict(os.environ)).encode():
    found.append("os.environ")
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    for name in ("cmdline", "environ"):
        try:
            with open(f"/proc/{{entry}}/{{name}}", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        scanned += 1
        if needle in data:
            found.append(f"/proc/{{entry}}/{{name}}")
print("scanned", scanned)
print("FOUND" if found else "clean", found)
"""


@pytest.fixture
def secret_process() -> Iterator[str]:
    """A host process with a secret on its command line (like `--api-key sk-...`)."""
    secret = f"SECRET-{token()}"
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", secret])
    deadline = time.monotonic() + 5  # Popen may return before exec has set the command line
    while not processes_with(secret) and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield secret
    finally:
        process.kill()
        process.wait()


def test_other_processes_are_invisible(
    runner: Runner, workspace: Path, secret_process: str
) -> None:
    assert processes_with(secret_process)  # the host sees it
    output = runner(FIND_IN_PROC.format(backwards=secret_process[::-1]), workspace)
    assert "clean" in output, output
    assert "FOUND" not in output and secret_process not in output, output


def test_secrets_in_the_environment_do_not_reach_the_box(
    runner: Runner, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"sk-{token()}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("MULLIGAN_API_KEY", secret)
    output = runner(FIND_IN_PROC.format(backwards=secret[::-1]), workspace)
    assert "clean" in output, output
    assert "FOUND" not in output and secret not in output, output


READ_SHADOW = """
try:
    print(open("/etc/shadow").read())
except OSError as exc:
    print("refused", type(exc).__name__)
print("done")
"""


def test_root_only_files_stay_unreadable(runner: Runner, workspace: Path) -> None:
    if not IS_ROOT:
        pytest.skip("needs root to know /etc/shadow's content")
    shadow = Path("/etc/shadow").read_text()
    output = runner(READ_SHADOW, workspace)
    assert "done" in output, output
    assert_no_leak(output, shadow)
