"""llama.cpp's OpenAI-compatible server (llama-cpp-python's), run as mulligan's own child.

`serve()` starts one on a free loopback port, waits until it answers a one-token
completion, and keeps it for the rest of the process: every later `serve()` of the same
file gets the same server. `stop_all()` ends them; it runs at exit (normal exit, an
error, Ctrl-C), and the child's own guards (`llama_child`) end it when mulligan is
killed. Mulligan talks to it through the ordinary OpenAI adapter.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from mulligan.errors import UserError
from mulligan.llm.local_model import BUILD_FLAGS, ModelFile

log = logging.getLogger("mulligan")

CONTEXT = 8192
"""Tokens of context: above the compression threshold (4000) plus a capped reply (2048)."""
READY_SECONDS = 300.0
"""How long loading the model may take before the start is given up (a slow, busy CPU)."""


THREADS_ENV = "MULLIGAN_LOCAL_THREADS"


def cores() -> int:
    """The cores this process may run on (its affinity), which is what the server can use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def threads() -> int:
    """$MULLIGAN_LOCAL_THREADS, else one fewer than the cores (at least 1): the core left over
    runs mulligan itself and the box's tests. llama.cpp's threads wait for one another at every
    token, so one thread that loses its core stalls them all: on this project's 2-core machine,
    busy with other work, 2 threads made 1.2 tokens/s where 1 made 9.5 (Qwen2.5-Coder-0.5B)."""
    given = os.environ.get(THREADS_ENV, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise UserError(f"${THREADS_ENV} must be a whole number of threads, not {given!r}")
        return int(given)
    return max(1, cores() - 1)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def software() -> str:
    try:
        return f"llama-cpp-python {importlib.metadata.version('llama_cpp_python')}"
    except importlib.metadata.PackageNotFoundError:
        return "llama-cpp-python (version unknown)"


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _request(url: str, body: dict[str, object] | None, timeout: float) -> dict[str, object]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    with _NO_PROXY.open(urllib.request.Request(url, data, headers), timeout=timeout) as reply:
        found = json.loads(reply.read())
    return found if isinstance(found, dict) else {}


@dataclass
class LocalServer:
    """One llama-cpp-python server process serving one model file."""

    model: ModelFile
    threads: int = field(default_factory=threads)
    context: int = CONTEXT
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def flags(self) -> list[str]:
        """The server's flags but for the host and port (which change from run to run)."""
        return [
            "--model", str(self.model.path), "--model_alias", self.model.alias,
            "--n_ctx", str(self.context), "--n_threads", str(self.threads),
            "--n_threads_batch", str(self.threads),
        ]  # fmt: skip

    def facts(self) -> dict[str, object]:
        """What a run's manifest records of the server."""
        flags = self.flags()
        flags[1] = self.model.path.name  # the file itself is recorded by name, size and sha256
        return {"software": software(), "flags": flags}

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, ready_seconds: float = READY_SECONDS) -> None:
        for _ in range(3):  # a port taken between probing and binding: another port
            self.port = free_port()
            self._spawn()
            if self._wait_until_ready(ready_seconds):
                return
            self.stop()
        raise UserError(self._failure("could not bind a loopback port"))

    def _spawn(self) -> None:
        handle, name = tempfile.mkstemp(prefix="mulligan-llama-", suffix=".log")
        self.log_path = Path(name)
        main = threading.current_thread() is threading.main_thread()
        guard = ["--die-with-parent"] if main else []  # PDEATHSIG follows the parent thread
        command = [
            sys.executable, "-m", "mulligan.llm.llama_child", str(os.getpid()), *guard, "--",
            *self.flags(), "--host", "127.0.0.1", "--port", str(self.port),
        ]  # fmt: skip
        log.info("starting the local server: %s", " ".join(command))
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,  # the watchdog pipe: never written, closed when we are gone
            stdout=handle,
            stderr=handle,
            start_new_session=True,  # Ctrl-C reaches mulligan, which then stops the server
        )
        os.close(handle)

    def _wait_until_ready(self, ready_seconds: float) -> bool:
        """True once it answers a one-token completion; False if the port was taken."""
        deadline = time.monotonic() + ready_seconds
        url = f"http://127.0.0.1:{self.port}/v1"
        while time.monotonic() < deadline:
            if not self.running():
                if "address already in use" in self._log_tail().lower():
                    return False
                raise UserError(self._failure("it stopped while loading the model"))
            try:
                _request(f"{url}/models", None, timeout=5)
                break
            except (OSError, ValueError):
                time.sleep(0.25)
        else:
            raise UserError(self._failure(f"it did not answer within {ready_seconds:.0f}s"))
        try:  # the first prompt is where a wrongly built llama.cpp dies (SIGILL)
            _request(f"{url}/completions", {"prompt": "Hi", "max_tokens": 1}, timeout=120)
        except (OSError, ValueError) as exc:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=3)  # type: ignore[union-attr]  # a crash: its status
            raise UserError(self._failure(f"its first completion failed ({exc})")) from exc
        log.info("local server ready at %s (%s)", url, self.model.path.name)
        return True

    def _log_tail(self) -> str:
        try:
            return (self.log_path.read_text(errors="replace") if self.log_path else "")[-2000:]
        except OSError:
            return ""

    def _failure(self, what: str) -> str:
        """One line: what went wrong with the server, the likely cause, and its log."""
        code = self.process.poll() if self.process else None
        self.stop(keep_log=True)
        if code == -signal.SIGILL:
            return (
                f"the local llama.cpp server died with SIGILL (an instruction this CPU lacks): "
                f"llama-cpp-python was built for another CPU; rebuild it with `{BUILD_FLAGS} "
                "pip install --no-cache-dir --force-reinstall 'llama-cpp-python[server]==0.3.36'`"
            )
        last = " | ".join(line for line in self._log_tail().splitlines()[-3:] if line.strip())
        return (
            f"the local llama.cpp server for {self.model.path.name}: {what}"
            f"{f' (exit status {code})' if code is not None else ''}; "
            f"its log {self.log_path}: {last[-300:]}"
        )

    def stop(self, keep_log: bool = False) -> None:
        """End the server and everything it started; wait until it is gone."""
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                _signal_group(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    _signal_group(process.pid, signal.SIGKILL)
                    process.wait(timeout=10)
            if process.stdin:
                process.stdin.close()
        if self.log_path and not keep_log:
            self.log_path.unlink(missing_ok=True)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # its own session: the group is the server and its children


_servers: dict[Path, LocalServer] = {}
_lock = threading.Lock()
_atexit: list[bool] = []


def serve(model: ModelFile, count: int | None = None) -> LocalServer:
    """The running server of this model file (with `count` threads), started if there is none."""
    with _lock:
        server = _servers.get(model.path)
        if server is not None and server.running():
            return server
        server = LocalServer(model, threads=count or threads())
        if not _atexit:
            atexit.register(stop_all)
            _atexit.append(True)
        _servers[model.path] = server  # before it starts: a Ctrl-C while it loads stops it too
        try:
            server.start()
        except BaseException:
            server.stop(keep_log=True)
            del _servers[model.path]
            raise
        return server


def server_at(base_url: str) -> LocalServer | None:
    """The local server behind `base_url`, if mulligan started it."""
    return next((s for s in _servers.values() if s.base_url == base_url.rstrip("/")), None)


def stop_all() -> None:
    with _lock:
        for server in list(_servers.values()):
            server.stop()
        _servers.clear()
