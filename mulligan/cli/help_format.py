"""How the parser looks and behaves: global flags (-v, --json) anywhere on the line,
--version, defaults shown in every --help, and --json refused where a command has none."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

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


class VersionAction(argparse.Action):
    """--version: the installed version, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)
        self.help = "show the version and exit"

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"mulligan {version('mulligan')}")
        except PackageNotFoundError:  # pragma: no cover - run from a source tree
            print("mulligan unknown")
        parser.exit(0)


def _add_global_flags(parser: argparse.ArgumentParser, json: bool, top: bool) -> None:
    """-v (and --json where a command prints JSON) on the top parser and on each command;
    on commands they default to SUPPRESS so they never undo a flag given before them."""
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    if json and "--json" not in parser._option_string_actions:
        parser.add_argument("--json", action="store_true", help="machine-readable output")
    for action in parser._actions:
        if action.dest in ("json", "verbose"):
            action.default = False if top else argparse.SUPPRESS


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
