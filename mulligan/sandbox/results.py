"""What a run may use (`Limits`), its output read as it comes into capped head-and-tail
buffers, and what it left (`RunResult`)."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass

EXIT_GRACE = 0.3
"""After the main process exits, how long a descendant may hold its output open."""


@dataclass(frozen=True)
class Limits:
    timeout: float = 10.0
    cpu_seconds: int = 10
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 32
    output_chars: int = 20_000
    """Bytes kept of each of stdout and stderr (head and tail); the rest is counted and dropped."""
    network: bool = False


@dataclass
class RunResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    stdout_dropped: int = 0
    stderr_dropped: int = 0
    report: str | None = None
    """What the program wrote to its report descriptor (only for runs that asked for one)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def describe(self) -> str:
        """stdout and stderr together, with the exit status when it is not 0."""
        parts = []
        if self.stdout.strip():
            parts.append(self.stdout.rstrip())
        if self.stderr.strip():
            parts.append("[stderr]\n" + self.stderr.rstrip())
        if self.timed_out:
            parts.append(f"[timed out after {self.seconds:.1f}s; every process killed]")
        elif self.exit_code not in (0, None):
            parts.append(f"[exit status {self.exit_code}{signal_name(self.exit_code)}]")
        return "\n".join(parts) if parts else "(no output)"


def signal_name(code: int | None) -> str:
    if code is None or code >= 0:
        return ""
    try:
        return f": killed by {signal.Signals(-code).name}"
    except ValueError:
        return ""


def pump(process: subprocess.Popen[bytes], sinks: dict[int, Capped], deadline: float) -> bool:
    """Read every stream into its sink until all close; True when the deadline passed first.

    A descendant that keeps a stream open after the main process ended is given EXIT_GRACE.
    """
    selector = selectors.DefaultSelector()
    for fd in sinks:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    exited_at: float | None = None
    try:
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                return True
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > EXIT_GRACE:
                return False
            for key, _ in selector.select(min(deadline - now, 0.05)):
                fd = int(key.fd)
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if chunk:
                    sinks[fd].add(chunk)
                else:
                    selector.unregister(fd)
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
        return False
    except subprocess.TimeoutExpired:
        return True
    finally:
        selector.close()


class Capped:
    """A stream's head and tail, up to `limit` bytes; the middle is counted and dropped."""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        excess = len(self.tail) - self.half
        if excess > 0:
            self.dropped += excess
            del self.tail[:excess]

    def text(self) -> str:
        head = self.head.decode(errors="replace")
        tail = self.tail.decode(errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[... {self.dropped} bytes cut ...]\n{tail}"
