"""The command line: a thin layer over the library. Parsing imports nothing heavy
(`cli/parser.py`); the chosen command's module is imported only when it runs."""

from __future__ import annotations

import logging
import os
import signal
import sys

from mulligan.cli import help_format
from mulligan.cli.exits import BAD_INPUT, FAILED, INTERRUPTED
from mulligan.cli.parser import build_parser, handler_of
from mulligan.errors import AgentRunError, UserError

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

__all__ = ["build_parser", "entry", "main"]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
