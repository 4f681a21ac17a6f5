"""One process at a time in an embedded lesson store, and whether another wrote since.

chromadb's embedded client keeps its vector index in memory, so a process must reload it
when another has written since it last looked. The lock file holds a generation, raised by
every write; a holder that finds a generation other than the one it last saw has been
overtaken. A chroma server needs none of this (no path: nothing is locked)."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


class GenerationLock:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._seen = -1
        """The generation this process last held the lock at (-1: never)."""

    @contextlib.contextmanager
    def held(self, write: bool = False) -> Iterator[bool]:
        """Hold the lock; yields whether another process wrote since this one last held it.
        A `write` raises the generation on the way out."""
        if self.path is None:
            yield False
            return
        with open(self.path, "a+", encoding="utf-8", errors="replace") as handle:  # garbage too
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                handle.seek(0)
                text = handle.read().strip() or "0"
                readable = text.isdecimal()  # else: as if another wrote, and counted from 0
                generation = int(text) if readable else 0
                yield not readable or self._seen not in (-1, generation)
                if write:
                    generation += 1
                    handle.seek(0)
                    handle.truncate()
                    handle.write(str(generation))
                    handle.flush()
                self._seen = generation
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
