"""Flags derived from the settings' fields (mulligan/settings/run_config.py): a setting's flag
takes its field's type (choices for a Literal, repeatable for a list, on/off for a bool) and
help (its description and default); its bounds are the field's, checked by pydantic when the
run configuration loads, as for a value from a file or variable. Nothing here names a setting.

The parser reads the fields through a generated table (cli/flag_table.json), so `--help` loads
no pydantic; `python scripts/flag_table.py` writes it again, and a test keeps the committed
one current."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from mulligan.settings.fields import Setting

TABLE = Path(__file__).with_name("flag_table.json")


class FlagRow(NamedTuple):
    path: str
    option: str
    dest: str
    kind: str
    """bool, choices, list, int, float or str"""
    choices: tuple[str, ...] | None
    help: str
    default: Any


FlagTable = tuple[tuple[tuple[str, str], ...], tuple[FlagRow, ...], dict[str, FlagRow]]


def read_table(text: str) -> FlagTable:
    found = json.loads(text)

    def row(values: list[Any]) -> FlagRow:
        made = FlagRow(*values)
        return made._replace(choices=tuple(made.choices) if made.choices else None)

    return (
        tuple((section, title) for section, title in found["sections"]),
        tuple(row(values) for values in found["settings"]),
        {name: row(values) for name, values in found["commands"].items()},
    )


SECTION_TITLES, SETTING_FLAGS, COMMAND_FLAGS = read_table(TABLE.read_text(encoding="utf-8"))

COMMAND_SETTINGS: dict[str, tuple[str, ...]] = {
    "attempt": ("endpoint", "actor", "budget", "compression", "run.mcp"),
    "doctor": ("endpoint.base_url", "endpoint.api_key", "endpoint.model", "run.memory",
               "run.embedding"),
    "solve": tuple(f"-{p}" for p in ("loop.self_tests",)),
    "serve": ("endpoint.model", "local", "compression.threshold_tokens",
              "budget.max_reply_tokens"),  # the model, its slots, threads and context
    "memory": ("endpoint", "budget", "memory.verify_pairs", "run.concurrency",
               "loop.min_similarity",  # memory verify
               "reflector", "memory.show_candidates", "validity"),  # memory mcp
}  # fmt: skip
"""The settings whose flags a command takes (`section` or `section.field`; `-path`: all
but it). `run`, `bench` and `solve` take every setting's flag, so a new setting's flag
appears there by itself."""


def takes(command: str, row: FlagRow) -> bool:
    chosen = COMMAND_SETTINGS.get(command, ())
    if any(item == f"-{row.path}" for item in chosen):
        return False
    section = row.path.partition(".")[0]
    wanted = [item for item in chosen if not item.startswith("-")]
    return not wanted or section in wanted or row.path in wanted


def add_setting_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """A group per section, with the flag of each setting this command takes."""
    for section, title in SECTION_TITLES:
        chosen = [row for row in SETTING_FLAGS if row.path.startswith(f"{section}.")]
        chosen = [row for row in chosen if takes(command, row)]
        if not chosen:
            continue
        group = parser.add_argument_group(f"[{section}] {title}")
        for row in chosen:
            group.add_argument(row.option, **argument(row))


def argument(row: FlagRow) -> dict[str, Any]:
    """argparse's keywords for a flag: its type, choices or action, and help."""
    kwargs: dict[str, Any] = {"dest": row.dest, "help": row.help, "default": row.default}
    if row.kind == "bool":
        kwargs["action"] = "store_true"
    elif row.kind == "choices":
        kwargs["choices"] = row.choices
    elif row.kind == "list":
        kwargs.update(action="append", metavar="VALUE")
    elif row.kind in ("int", "float"):
        kwargs.update(type=int if row.kind == "int" else float)
        kwargs["metavar"] = "N" if row.kind == "int" else "X"
    return kwargs


def add_command_flag(parser: Any, name: str, **more: Any) -> None:
    """A command's number that is not a setting (`CommandFlags`), with its type, default
    and help from there."""
    kwargs = argument(COMMAND_FLAGS[name]) | more
    kwargs.pop("dest")
    parser.add_argument("--" + name.replace("_", "-"), **kwargs)


# ---------------------------------------------------------------- the generated table


def row_of(one: Setting, dest: str, option: str, default: Any, help_text: str) -> FlagRow:
    kind = "str"
    if one.kind is bool:
        kind = "bool"
    elif one.choices:
        kind = "choices"
    elif one.is_list:
        kind = "list"
    elif one.kind in (int, float):
        kind = one.kind.__name__
    return FlagRow(one.path, option, dest, kind, one.choices, help_text, default)


def shown_default(one: Setting) -> str:
    value = one.default
    if value in (None, [], {}) or one.kind is bool:
        return ""
    return f" (default {value})"


def flag_table() -> FlagTable:
    """What cli/flag_table.json holds, made from the fields: the sections' titles, a row per
    setting with a flag, and a row per command number."""
    from mulligan.settings.command_flags import CommandFlags
    from mulligan.settings.fields import command_flag, settings
    from mulligan.settings.run_config import SECTIONS, section_model

    titles = tuple(
        (section, (section_model(section).__doc__ or "").strip().splitlines()[0].rstrip("."))
        for section in SECTIONS
    )
    rows = tuple(
        row_of(one, one.flag, str(one.option), None, one.help + shown_default(one))
        for one in settings()
        if one.flag
    )
    numbers = {
        name: row_of(one, name, "--" + name.replace("_", "-"), one.default, one.help)
        for name in CommandFlags.model_fields
        for one in [command_flag(name)]
    }
    return titles, rows, numbers


def flag_table_text() -> str:
    """The text of cli/flag_table.json."""
    titles, rows, numbers = flag_table()
    table = {"sections": titles, "settings": rows, "commands": numbers}
    return json.dumps(table, indent=1) + "\n"
