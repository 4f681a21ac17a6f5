"""How the command line looks: global flags anywhere, defaults in every --help,
--version, coloured PASS/FAIL, tables on a terminal, and progress bars (rich) that
log lines never break, with plain lines when output is not a terminal.

Only the CLI uses this module; rich is imported when something is drawn."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

JSON_COMMANDS = ("attempt", "run", "tasks", "memory", "episodes", "data", "config")
"""Commands with a --json output (the listings and the records)."""


def _shows_default(action: argparse.Action) -> bool:
    return bool(action.option_strings) and action.default not in (
        None, False, argparse.SUPPRESS, [],
    )  # fmt: skip


class DefaultsFormatter(argparse.HelpFormatter):
    """Every option with a default says it, even one without a help text."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if _shows_default(action) and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text

    def _format_action(self, action: argparse.Action) -> str:
        if not (action.help or "").strip() and _shows_default(action):
            action.help = "(default: %(default)s)"
        return super()._format_action(action)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("mulligan")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "unknown"


class VersionAction(argparse.Action):
    """--version: the installed version, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)
        self.help = "show the version and exit"

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(f"mulligan {version()}")
        parser.exit(0)


def _add_global_flags(parser: argparse.ArgumentParser, json: bool, top: bool) -> None:
    """-v (and --json where a command prints JSON) on the top parser and on each command;
    on commands they default to SUPPRESS so they never undo a flag given before them."""
    default: Any = False if top else argparse.SUPPRESS
    known = {s for a in parser._actions for s in a.option_strings}
    if "-v" not in known:
        parser.add_argument(
            "-v", "--verbose", action="store_true", default=default, help="log what happens"
        )
    if json and "--json" not in known:
        parser.add_argument(
            "--json", action="store_true", default=default, help="machine-readable output"
        )
    if not top:
        for action in parser._actions:
            if action.dest in ("json", "verbose"):
                action.default = argparse.SUPPRESS


def commands_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def finish(parser: argparse.ArgumentParser) -> None:
    """Global flags anywhere, --version, and defaults shown in every --help."""
    parser.add_argument("--version", action=VersionAction)
    _add_global_flags(parser, json=True, top=True)
    parser.formatter_class = DefaultsFormatter
    for name, command in commands_of(parser).items():
        _add_global_flags(command, json=name in JSON_COMMANDS, top=False)
        command.formatter_class = DefaultsFormatter


def settle(args: argparse.Namespace) -> None:
    """After parsing: --json given on a command without JSON output is a user error."""
    from mulligan.errors import UserError

    args.verbose = getattr(args, "verbose", False)
    args.json = getattr(args, "json", False)
    if args.json and args.command not in JSON_COMMANDS:
        raise UserError(f"--json: `mulligan {args.command}` has no JSON output")


# ------------------------------------------------------------------ colour and tables


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


# ------------------------------------------------------------------ progress


@dataclass
class Counts:
    done: int = 0
    passed: int = 0
    tokens: int = 0
    cost: float | None = 0.0


def _cost(cost: float | None) -> str:
    return "cost unknown" if cost is None else f"${cost:.4f}"


def _seconds(value: float) -> str:
    value = int(value)
    return f"{value // 60}m{value % 60:02d}s" if value >= 60 else f"{value}s"


@dataclass
class Progress:
    """Tasks done/total, passes, tokens, cost, elapsed and ETA for each key (a strategy).

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
        if self._bars is not None:
            if key not in self._ids:
                self._ids[key] = self._bars.add_task(key, total=self.total, **self._fields(c))
            self._bars.update(self._ids[key], completed=c.done, **self._fields(c))
            return
        elapsed = now - self.started[key]
        eta = elapsed / c.done * (self.total - c.done) if c.done else 0.0
        print(
            f"{self.prefix}{key:<22} {c.done}/{self.total} tasks · {c.passed} passed · "
            f"{c.tokens:,} tokens · {_cost(c.cost)} · {_seconds(elapsed)} elapsed · "
            f"ETA {_seconds(eta)}",
            file=self.stream,
            flush=True,
        )

    @staticmethod
    def _fields(c: Counts) -> dict[str, Any]:
        return {"passed": c.passed, "tokens": f"{c.tokens:,}", "cost": _cost(c.cost)}

    def start_key(self, key: str) -> None:
        """Show a bar at 0 before the key's first task ends (plain mode: nothing)."""
        self.started.setdefault(key, time.monotonic())
        if self._bars is not None and key not in self._ids:
            c = self.counts.setdefault(key, Counts())
            self._ids[key] = self._bars.add_task(key, total=self.total, **self._fields(c))

    @contextmanager
    def shown(self) -> Iterator[Progress]:
        live = self.stream.isatty() if self.live is None else self.live
        if not live:
            yield self
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as Bars

        console = Console(file=self.stream, force_terminal=self.live or None, width=self.width)
        self._bars = Bars(
            TextColumn(self.prefix + "{task.description:<22}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("tasks · {task.fields[passed]} passed · {task.fields[tokens]} tokens"),
            TextColumn("· {task.fields[cost]} ·"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
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
    found = []
    for logger in (logging.getLogger(), logging.getLogger("mulligan")):
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream in (
                stream,
                sys.stderr,
                sys.__stderr__,
            ):
                found.append(handler)
    return found
