"""Progress on long work: rich bars on a terminal that log lines and prints never break,
one plain line per finished task otherwise. rich is imported only when bars are drawn."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO


@dataclass
class Counts:
    done: int = 0
    passed: int = 0
    tokens: int = 0
    cost: float | None = 0.0
    priced: bool = False
    """Some call had a price above 0; until then the cost is left out (the local model, or
    an endpoint nobody priced, costs tokens and time, not dollars)."""

    def cost_text(self) -> str:
        """ " · $0.0123" (" · cost unknown" once some call had no price); nothing unpriced."""
        if not self.priced:
            return ""
        return " · cost unknown" if self.cost is None else f" · ${self.cost:.4f}"


def _seconds(value: float) -> str:
    value = int(value)
    return f"{value // 60}m{value % 60:02d}s" if value >= 60 else f"{value}s"


@dataclass
class Progress:
    """Tasks done/total, passes, tokens, cost where priced, elapsed and ETA for each key (a
    strategy).

    On a terminal: rich bars on standard error, redrawn in place, with log records and
    prints shown above them. Otherwise: one plain line per finished task."""

    total: int
    prefix: str = ""
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    live: bool | None = None
    """Bars (True) or plain lines (False); default: bars when `stream` is a terminal."""
    width: int | None = None
    """Columns for the bars (default: the terminal's)."""
    counts: dict[str, Counts] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    _bars: Any = None
    _ids: dict[str, Any] = field(default_factory=dict)

    def advance(self, key: str, passed: bool, tokens: int, cost: float | None) -> None:
        now = time.monotonic()
        self.started.setdefault(key, now)
        c = self.counts.setdefault(key, Counts())
        c.done, c.passed, c.tokens = c.done + 1, c.passed + passed, c.tokens + tokens
        c.cost = None if c.cost is None or cost is None else c.cost + cost
        c.priced = c.priced or bool(cost)
        if self._bars is not None:
            if key not in self._ids:
                self._ids[key] = self._bars.add_task(key, total=self.total, **self._fields(c))
            self._bars.update(self._ids[key], completed=c.done, **self._fields(c))
            return
        elapsed = now - self.started[key]
        eta = elapsed / c.done * (self.total - c.done) if c.done else 0.0
        print(
            f"{self.prefix}{key:<22} {c.done}/{self.total} tasks · {c.passed} passed · "
            f"{c.tokens:,} tokens{c.cost_text()} · {_seconds(elapsed)} elapsed · "
            f"ETA {_seconds(eta)}",
            file=self.stream,
            flush=True,
        )

    @staticmethod
    def _fields(c: Counts) -> dict[str, Any]:
        return {"passed": c.passed, "tokens": f"{c.tokens:,}", "cost": c.cost_text()}

    @contextmanager
    def shown(self) -> Iterator[Progress]:
        live = self.stream.isatty() if self.live is None else self.live
        if not live:
            yield self
            return
        from rich import progress as bars
        from rich.console import Console

        console = Console(file=self.stream, force_terminal=self.live or None, width=self.width)
        self._bars = bars.Progress(
            bars.TextColumn(self.prefix + "{task.description:<22}"),
            bars.BarColumn(),
            bars.MofNCompleteColumn(),
            bars.TextColumn(
                "tasks · {task.fields[passed]} passed · {task.fields[tokens]} tokens"
                "{task.fields[cost]} ·"
            ),
            bars.TimeElapsedColumn(),
            bars.TextColumn("ETA"),
            bars.TimeRemainingColumn(),
            console=console,
            redirect_stdout=True,  # prints (verdict lines) appear above the bars
            redirect_stderr=True,
        )
        handlers = _log_handlers_on(self.stream)
        with self._bars:
            for handler in handlers:  # log records print above the bars, never through them
                handler.setStream(_ConsoleLines(console))  # type: ignore[arg-type]
            try:
                yield self
            finally:
                for handler in handlers:
                    handler.setStream(self.stream)
                self._bars = None


class _ConsoleLines:
    """A file for logging handlers that hands whole lines to a rich console."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self.pending = ""

    def write(self, text: str) -> int:
        self.pending += text
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        return len(text)

    def flush(self) -> None:
        pass


def _log_handlers_on(stream: TextIO) -> list[logging.StreamHandler[Any]]:
    loggers = (logging.getLogger(), logging.getLogger("mulligan"))
    return [
        handler
        for logger in loggers
        for handler in logger.handlers
        if isinstance(handler, logging.StreamHandler)
        and handler.stream in (stream, sys.stderr, sys.__stderr__)
    ]
