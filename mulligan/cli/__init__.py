"""The command line: a thin layer over the library. Parsing imports nothing heavy
(`cli/parser.py`); the chosen command's module is imported only when it runs."""

from __future__ import annotations

import os
import signal
import sys

from mulligan.cli import help_format
from mulligan.cli.parser import build_parser, handler_of
from mulligan.errors import AgentRunError, UserError

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

PASSED = 0
FAILED = 1
BAD_INPUT = 2
INTERRUPTED = 130

EXIT_STATUSES = {  # the same for every command; docs/settings.md lists them from here
    PASSED: "the command did what it was asked; for run, bench and solve: every task passed",
    FAILED: "it ran, but something failed: a task did not pass, the endpoint failed, or the "
    "agent stopped with an error (a budget, the model's behaviour); an endpoint that stops "
    "answering stops the run, which --resume RUN_ID continues once it answers again",
    BAD_INPUT: "bad input or usage, reported in one line before any work starts (a flag, a "
    "setting, a task file, a memory directory, an endpoint that cannot be reached)",
    INTERRUPTED: "interrupted (Ctrl-C); a run can be continued with --resume RUN_ID",
}

__all__ = ["build_parser", "entry", "main"]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    import logging  # here, not at the top: `--help` ends in parse_args and needs none of it

    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        from mulligan.cli.flag_checks import check_flags  # pydantic: once a command runs

        help_format.settle(args)
        check_flags(args)
        return handler_of(args)(args)
    except (UserError, AgentRunError) as exc:
        print(f"mulligan: {exc}", file=sys.stderr)
        return BAD_INPUT if isinstance(exc, UserError) else FAILED
    except KeyboardInterrupt:
        print("mulligan: interrupted", file=sys.stderr)
        return INTERRUPTED


def entry() -> None:
    """The console script: like main(), and `mulligan ... | head` ends quietly."""
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
