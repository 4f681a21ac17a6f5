"""How the command line shows the local model being prepared: one line each on stderr, and
one line that advances (on a terminal) while the model's parts are joined or checked."""

from __future__ import annotations

import sys
from typing import TextIO


class StderrReporter:
    """`mulligan: ...` lines on stderr; progress rewrites its line on a terminal, and on a
    pipe or file shows only its start and end."""

    def __init__(self) -> None:
        self._shown = -1

    @property
    def stream(self) -> TextIO:
        return sys.stderr  # the one of the moment (tests capture it)

    def line(self, text: str) -> None:
        print(f"mulligan: {text}", file=self.stream, flush=True)

    def progress(self, text: str, done: int, total: int) -> None:
        percent = 100 * done // total if total else 100
        if self.stream.isatty():
            if percent != self._shown:
                end = "\n" if done >= total else ""
                print(f"\rmulligan: {text}: {percent}%", end=end, file=self.stream, flush=True)
        elif done == 0 or done >= total:
            self.line(f"{text}: {'done' if done >= total else 'started'}")
        self._shown = percent


REPORTER = StderrReporter()
