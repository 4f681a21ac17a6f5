"""What the commands print: PASS/FAIL coloured on a colour terminal, and tables (rich) on a
terminal with plain lines when piped. rich is imported only when a table is drawn."""

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
