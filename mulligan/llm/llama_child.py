"""The local server's own process:
`python -m mulligan.llm.llama_child PARENT_PID [--die-with-parent] -- SERVER FLAGS...`.
It makes sure it cannot outlive mulligan, then runs llama.cpp's own C++ server (through the
`xllamacpp` package) in itself, on a port the kernel picks on 127.0.0.1, and writes the
address it listens on to its log as one line, `READY_MARK` and the URL.

Two guards, because either alone has a gap:
- Linux's PR_SET_PDEATHSIG: the kernel sends SIGKILL when the parent dies, even by SIGKILL
  (it follows the parent *thread*, so mulligan asks for it only from its main thread);
- a watchdog pipe: standard input is a pipe whose only writer is mulligan; when mulligan is
  gone, for any reason, the read returns end of file and this process exits at once.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1
READY_MARK = "mulligan-llama-child: listening at "
"""The log line that gives the server's address once the model is loaded."""


def die_with_parent(parent: int) -> None:
    """Ask the kernel for SIGKILL when the parent dies (Linux); exit if it is already gone."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            print(f"prctl failed: errno {ctypes.get_errno()}", file=sys.stderr)
    if os.getppid() != parent:  # the parent died before the guard was set
        os._exit(3)


def watch_pipe() -> None:
    """Exit as soon as the watchdog pipe on standard input is closed."""

    def wait() -> None:
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                pass
        os._exit(4)

    threading.Thread(target=wait, name="mulligan-watchdog", daemon=True).start()


def server_flags() -> argparse.ArgumentParser:
    """The server's flags, named as llama.cpp's own `llama-server` names them."""
    parser = argparse.ArgumentParser(prog="llama_child")
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--parallel", type=int, default=1, help="slots: requests served at once")
    parser.add_argument("--ctx-size", type=int, required=True, help="tokens, split across slots")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--threads-batch", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port the kernel picks")
    return parser


def run_server(flags: list[str]) -> None:
    """llama.cpp's server in this process, with a prompt cache per slot, until it is ended."""
    import xllamacpp  # after the guards: loading the library takes a moment

    given = server_flags().parse_args(flags)
    params = xllamacpp.CommonParams()
    params.model.path = given.model
    params.model_alias = {given.alias}
    params.n_parallel = given.parallel
    params.n_ctx = given.ctx_size
    params.cpuparams.n_threads = given.threads
    params.cpuparams_batch.n_threads = given.threads_batch
    params.hostnames = [given.host]
    params.port = given.port
    params.cache_prompt = True
    server = xllamacpp.Server(params)  # returns once the model is loaded and it listens
    # one write, newline included: print() writes the line and its end separately, and
    # llama.cpp's own log, on the same stream, once landed between them ("...:38851I srv")
    os.write(sys.stderr.fileno(), f"{READY_MARK}{server.listening_address}\n".encode())
    threading.Event().wait()  # serves from its own threads until a signal or the watchdog


def main(argv: list[str]) -> None:
    if "--" not in argv or not argv or not argv[0].isdigit():
        raise SystemExit("usage: llama_child PARENT_PID [--die-with-parent] -- SERVER FLAGS")
    cut = argv.index("--")
    if "--die-with-parent" in argv[:cut]:
        die_with_parent(int(argv[0]))
    watch_pipe()
    run_server(argv[cut + 1 :])


if __name__ == "__main__":
    main(sys.argv[1:])
