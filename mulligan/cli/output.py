"""What the commands print: PASS/FAIL coloured on a colour terminal, tables (rich) on a
terminal with plain lines when piped (rich is imported only when a table is drawn), and the
local model being prepared: one line each on stderr, and one line that advances (on a
terminal) while the model's parts are joined or checked."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TextIO


def colour_on(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


MARKS = {"PASS": "\033[32mPASS\033[0m", "FAIL": "\033[31mFAIL\033[0m"}


def marked(line: str, stream: TextIO | None = None) -> str:
    """A line starting with PASS or FAIL, green or red on a colour terminal."""
    stream = stream or sys.stdout
    head = line[:4]
    return MARKS[head] + line[4:] if head in MARKS and colour_on(stream) else line


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], plain: Sequence[str], stream: TextIO
) -> None:
    """A table on a terminal; the `plain` lines (one per row) when piped or redirected."""
    if not stream.isatty():
        for line in plain:
            print(line, file=stream)
        return
    from rich.console import Console
    from rich.table import Table

    view = Table(*header, show_lines=False, header_style="bold")
    for row in rows:
        view.add_row(*row)
    Console(file=stream, highlight=False).print(view)


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
