"""Bounded output: every stream read as it comes into a capped head-and-tail buffer."""

from __future__ import annotations

import os
import selectors
import subprocess
import time

EXIT_GRACE = 0.3
"""After the main process exits, how long a descendant may hold its output open."""


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
