"""The local server's own process:
`python -m mulligan.llm.llama_child PARENT_PID [--die-with-parent] -- SERVER FLAGS...`.
It makes sure it cannot outlive mulligan, then runs llama-cpp-python's server in itself.

Two guards, because either alone has a gap:
- Linux's PR_SET_PDEATHSIG: the kernel sends SIGKILL when the parent dies, even by SIGKILL
  (it follows the parent *thread*, so mulligan asks for it only from its main thread);
- a watchdog pipe: standard input is a pipe whose only writer is mulligan; when mulligan is
  gone, for any reason, the read returns end of file and this process exits at once.
"""

from __future__ import annotations

import ctypes
import os
import runpy
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1


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
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        os._exit(4)

    threading.Thread(target=wait, name="mulligan-watchdog", daemon=True).start()


def main(argv: list[str]) -> None:
    if "--" not in argv or not argv or not argv[0].isdigit():
        raise SystemExit("usage: llama_child PARENT_PID [--die-with-parent] -- SERVER FLAGS")
    cut = argv.index("--")
    if "--die-with-parent" in argv[:cut]:
        die_with_parent(int(argv[0]))
    watch_pipe()
    sys.argv = ["llama_cpp.server", *argv[cut + 1 :]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
