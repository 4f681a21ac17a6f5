"""llama.cpp's own OpenAI-compatible C++ server (through `xllamacpp`), run as mulligan's child.

`serve()` starts one on a free loopback port with `slots` requests served at once
(continuous batching, a prompt cache per slot), waits until it answers a one-token
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
from mulligan.llm.llama_child import READY_MARK
from mulligan.llm.local_model import SOURCE_BUILD, ModelFile, sha256_of
from mulligan.settings.sections import LocalSection

log = logging.getLogger("mulligan")

CONTEXT_PER_SLOT = 8192
"""Tokens of context per slot by default: above compression's threshold (4000) plus a capped
reply (2048), with room for the estimate's error (`context_per_slot`)."""
READY_SECONDS = 300.0
"""How long loading the model may take before the start is given up (a slow, busy CPU)."""


def context_per_slot(threshold_tokens: int, reply_tokens: int) -> int:
    """What one slot must hold: a view at compression's threshold and a capped reply, plus a
    quarter for the offline estimate's error, in whole KiB of tokens."""
    needed = (threshold_tokens + reply_tokens) * 5 // 4
    return max(2048, -(-needed // 1024) * 1024)


def default_threads() -> int:
    """Every core this process may run on (its affinity, which is what the server can use).
    On a quiet 2-core machine two threads served four requests at once at 14.9 tokens/s
    against one thread's 9.0, and answered a first token in half the time
    (benchmarks/local_model.py; docs/local-model.md). The box's tests and mulligan itself
    take a core only for moments, and the server's threads wait passively
    (`OMP_WAIT_POLICY=PASSIVE`), so they give way instead of spinning."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class ServerSettings(LocalSection):
    """How the local server runs: the `[local]` settings (their one definition), with the
    run's concurrency for slots when none are given and the context each slot holds."""

    context_per_slot: int = CONTEXT_PER_SLOT
    port: int = 0
    """The port on 127.0.0.1; 0 (the default): a free one the kernel picks, so no other
    program can race for it. `mulligan serve --port` names one for other processes."""


def software() -> str:
    try:
        return f"xllamacpp {importlib.metadata.version('xllamacpp')} (llama.cpp's server)"
    except importlib.metadata.PackageNotFoundError:
        return "xllamacpp (version unknown)"


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _request(url: str, body: dict[str, object] | None, timeout: float) -> dict[str, object]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    with _NO_PROXY.open(urllib.request.Request(url, data, headers), timeout=timeout) as reply:
        found = json.loads(reply.read())
    return found if isinstance(found, dict) else {}


@dataclass
class LocalServer:
    """One llama.cpp server process serving one model file."""

    model: ModelFile
    settings: ServerSettings = field(default_factory=ServerSettings)
    address: str = ""
    """Where it listens, `http://127.0.0.1:PORT`, once it has said so."""
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"{self.address}/v1"

    @property
    def threads(self) -> int:
        return self.settings.threads or default_threads()

    @property
    def slots(self) -> int:
        return self.settings.slots or 1

    @property
    def context(self) -> int:
        """Tokens of context in all; llama.cpp gives each slot an equal share."""
        return self.slots * self.settings.context_per_slot

    def flags(self) -> list[str]:
        """The server's flags but for the host and port (the kernel picks a free one)."""
        return [
            "--model", str(self.model.path), "--alias", self.model.alias,
            "--parallel", str(self.slots), "--ctx-size", str(self.context),
            "--threads", str(self.threads), "--threads-batch", str(self.threads),
        ]  # fmt: skip

    def facts(self) -> dict[str, object]:
        """What a run's manifest records of the server and `--resume` compares: not its slots
        and threads, which set how fast it runs (the manifest's `endpoint` names them)."""
        flags = ["--model", self.model.path.name, "--alias", self.model.alias]  # the file's
        # name here; its size and sha256 in the manifest's `local_model`
        return {
            "software": software(),
            "flags": flags,
            "context_per_slot": self.settings.context_per_slot,
        }

    def shape(self) -> str:
        return f"{self.slots} slot{'s' if self.slots != 1 else ''}, {self.threads} threads"

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the server; returns once it answers a one-token completion."""
        handle, name = tempfile.mkstemp(prefix="mulligan-llama-", suffix=".log")
        self.log_path = Path(name)
        main = threading.current_thread() is threading.main_thread()
        guard = ["--die-with-parent"] if main else []  # PDEATHSIG follows the parent thread
        command = [
            sys.executable, "-m", "mulligan.llm.llama_child", str(os.getpid()), *guard, "--",
            *self.flags(), "--host", "127.0.0.1", "--port", str(self.settings.port),
        ]  # fmt: skip
        log.info("starting the local server: %s", " ".join(command))
        # OpenMP's spinning workers crawl when the cores are shared: they wait passively
        environment = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ}
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,  # the watchdog pipe: never written, closed when we are gone
            stdout=handle,
            stderr=handle,
            env=environment,
            start_new_session=True,  # Ctrl-C reaches mulligan, which then stops the server
        )
        os.close(handle)
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline and not self.address:
            if not self.running():
                raise UserError(self._failure("it stopped while loading the model"))
            self.address = address_in(self._log_text())
            time.sleep(0.1)
        if not self.address:
            raise UserError(self._failure(f"it did not load within {READY_SECONDS:.0f}s"))
        try:  # the first prompt is where a llama.cpp built for another CPU dies (SIGILL)
            _request(f"{self.base_url}/models", None, timeout=30)
            _request(f"{self.base_url}/completions", {"prompt": "Hi", "max_tokens": 1}, 120)
        except (OSError, ValueError) as exc:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=3)  # type: ignore[union-attr]  # a crash: its status
            raise UserError(self._failure(f"its first completion failed ({exc})")) from exc
        log.info(
            "local server ready at %s (%s, %d slots, %d threads)",
            self.base_url, self.model.path.name, self.slots, self.threads,
        )  # fmt: skip

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""

    def _failure(self, what: str) -> str:
        """One line: what went wrong with the server, the likely cause, and its log."""
        code = self.process.poll() if self.process else None
        self.stop(keep_log=True)
        if code == -signal.SIGILL:
            return (
                "the local llama.cpp server died with SIGILL (an instruction this CPU lacks): "
                f"the prebuilt xllamacpp wheel does not fit this CPU; build it for this machine "
                f"with `{SOURCE_BUILD}` (needs a C++ compiler and CMake)"
            )
        tail = self._log_text()[-2000:]
        last = " | ".join(line for line in tail.splitlines()[-3:] if line.strip())
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


def serve(model: ModelFile, settings: ServerSettings | None = None) -> LocalServer:
    """The running server of this model file, started with `settings` if there is none."""
    with _lock:
        server = _servers.get(model.path)
        if server is not None and server.running():
            return server
        server = LocalServer(model, settings or ServerSettings())
        _servers[model.path] = server  # before it starts: a Ctrl-C while it loads stops it too
        try:
            server.start()
        except BaseException:
            server.stop(keep_log=True)
            del _servers[model.path]
            raise
        return server


def served_facts(base_url: str, waits: tuple[float, ...] = ()) -> dict[str, object] | None:
    """What a llama.cpp server another process runs (`mulligan serve`, or the user's own)
    says of itself at /props: its slots, build and model file, with the file's size and
    sha256 when it is on this machine; None for an endpoint that is no llama.cpp server.
    A server not listening yet or still loading its model is asked again after each of
    `waits` (seconds), as a model call would be: a run started beside its server still
    records what it serves."""
    url = base_url.rstrip("/").removesuffix("/v1") + "/props"
    for wait in (*waits, None):
        try:
            props = _request(url, None, timeout=5)
            break
        except urllib.error.HTTPError as exc:
            starting = exc.code == 503  # "Loading model"
        except urllib.error.URLError as exc:
            starting = isinstance(exc.reason, ConnectionError)
        except (OSError, ValueError):
            return None
        if not starting:
            return None
        if wait is None:
            log.warning("%s did not answer /props: this run's manifest records no model file", url)
            return None
        time.sleep(wait)
    slots, path = props.get("total_slots"), Path(str(props.get("model_path") or ""))
    if not isinstance(slots, int) or isinstance(slots, bool):
        return None
    model: dict[str, object] = {"file": path.name}
    with contextlib.suppress(OSError):  # a file this user cannot read is named only
        if path.is_file():
            model |= {"size": path.stat().st_size, "sha256": sha256_of(path)}
    return {"slots": slots, "build": str(props.get("build_info") or "unknown"), "model": model}


def server_at(base_url: str) -> LocalServer | None:
    """The local server behind `base_url`, if mulligan started it."""
    return next((s for s in _servers.values() if s.base_url == base_url.rstrip("/")), None)


@atexit.register
def stop_all() -> None:
    with _lock:
        for server in list(_servers.values()):
            server.stop()
        _servers.clear()


def address_in(log_text: str) -> str:
    """The address the child said it listens at: the URL after its mark (llama.cpp, which
    shares the stream, may have left its own line unfinished before it or written after it
    on the same line); "" until it has said it."""
    for line in log_text.splitlines():
        if READY_MARK in line:
            said = line.partition(READY_MARK)[2].split()
            return said[0].rstrip("/") if said else ""
    return ""
