"""`mulligan serve`: the local model's server kept for other processes, on the port asked for,
until Ctrl-C or SIGTERM, and gone after. Runs the stand-in for `xllamacpp`
(tests/helpers/standin_llama), as the other lifecycle tests do."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from mulligan.cli import main
from tests.helpers.ports import free_port
from tests.helpers.terminal import ctrl_c_reaches_it
from tests.llm.test_local_server import WAIT, gone_within, standin, started_servers

__all__ = ["standin"]  # the fixture, used by name
pytestmark = pytest.mark.timeout(900)


def serve(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mulligan.cli", "serve", "--model", f"local:{env['MODEL']}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=ctrl_c_reaches_it,
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_answers_other_processes_until_stopped(
    tmp_path: Path, standin: dict[str, str], sig: signal.Signals
) -> None:
    port = free_port()
    process = serve(standin, "--port", str(port), "--local-slots", "2", "--local-threads", "1")
    try:
        assert process.stdout is not None
        first, second = process.stdout.readline(), process.stdout.readline()
        base_url = f"http://127.0.0.1:{port}/v1"
        assert f" at {base_url} (2 slots, 1 threads, " in first, first
        assert second.startswith(f"export OPENAI_BASE_URL={base_url} MULLIGAN_MODEL=standin")
        body = json.dumps({"messages": [{"role": "user", "content": "2+2?"}]}).encode()
        request = urllib.request.Request(
            f"{base_url}/chat/completions", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as reply:  # another process's call
            assert json.loads(reply.read())["choices"][0]["message"]["content"] == "4"
        (pid,) = started_servers(tmp_path)
        process.send_signal(sig)
        process.communicate(timeout=WAIT)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == (130 if sig == signal.SIGINT else 0)
    assert gone_within(pid, 60), f"the server outlived `mulligan serve` ({sig.name})"


def test_serve_refuses_a_port_in_use(standin: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve(standin, "--port", str(port))
        _, err = done.communicate(timeout=WAIT)
    assert done.returncode == 2
    assert f"--port {port}: already in use on 127.0.0.1" in err


@pytest.mark.parametrize(
    ("refused", "says"),
    [
        (errno.EACCES, "--port 80: this user may not listen on it (ports below 1024 need root);"
         " pick a port above 1024"),
        (errno.EADDRINUSE, "--port 80: already in use on 127.0.0.1; pick another port"),
    ],
    ids=["not-permitted", "in-use"],
)  # fmt: skip
def test_serve_says_why_it_cannot_listen_on_the_port(
    refused: int, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port below 1024 without root is refused as not permitted, not as in use (the tests
    run as root, so the refusal is the socket's, simulated)."""

    def bind(self: socket.socket, address: tuple[str, int]) -> None:
        raise OSError(refused, os.strerror(refused))

    monkeypatch.setattr(socket.socket, "bind", bind)
    assert main(["serve", "--model", "local", "--port", "80"]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err
    assert ("in use" in err) == (refused == errno.EADDRINUSE)


def test_serve_runs_only_a_model_on_this_machine(standin: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mulligan.cli", "serve", "--model", "gpt-4o"],
        capture_output=True, text=True, env=standin, timeout=WAIT,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--model gpt-4o: `mulligan serve` runs a model on this machine" in done.stderr


def test_serve_says_so_when_the_server_stops_on_its_own(
    tmp_path: Path, standin: dict[str, str]
) -> None:
    process = serve(standin, "--local-slots", "1")
    try:
        assert process.stdout is not None
        assert " at http://127.0.0.1:" in process.stdout.readline()
        (pid,) = started_servers(tmp_path)
        os.kill(pid, signal.SIGKILL)
        _, err = process.communicate(timeout=WAIT)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1
    assert "the local server stopped on its own" in err


def test_serve_says_so_in_one_line_when_the_server_dies_while_loading(
    standin: dict[str, str],
) -> None:
    done = serve({**standin, "STANDIN_LOAD_ERROR": "tensor data is not within the file"})
    out, err = done.communicate(timeout=WAIT)
    assert done.returncode == 2 and out == "" and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert "standin.gguf: it stopped while loading the model (exit status 1)" in line
    assert "tensor data is not within the file" in line  # the log's last words
