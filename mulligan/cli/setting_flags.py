"""Flags derived from the settings' fields (mulligan/settings/run_config.py): a setting's flag
takes its field's type (choices for a Literal, repeatable for a list, on/off for a bool) and
help (its description and default); its bounds are the field's, checked by pydantic when the
run configuration loads, as for a value from a file or variable. Nothing here names a setting.

The parser reads argparse's keywords for each flag from a generated table
(cli/flag_table.json), so `--help` loads no pydantic; `python scripts/flag_table.py` writes it
again, and a test keeps the committed one current."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mulligan.settings.fields import Setting

TABLE = Path(__file__).with_name("flag_table.json")
FLAGS: dict[str, Any] = json.loads(TABLE.read_text(encoding="utf-8"))

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


def takes(command: str, path: str) -> bool:
    chosen = COMMAND_SETTINGS.get(command, ())
    if f"-{path}" in chosen:
        return False
    wanted = [item for item in chosen if not item.startswith("-")]
    return not wanted or path.partition(".")[0] in wanted or path in wanted


def typed(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The table's keywords with the type named there (`int`, `float`) made the type."""
    kind = {"int": int, "float": float}.get(kwargs.get("type", ""))
    return kwargs | ({"type": kind} if kind else {})


def add_setting_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """A group per section, with the flag of each setting this command takes."""
    for section, title in FLAGS["sections"]:
        chosen = [
            (option, kwargs)
            for path, option, kwargs in FLAGS["settings"]
            if path.startswith(f"{section}.") and takes(command, path)
        ]
        if chosen:
            group = parser.add_argument_group(f"[{section}] {title}")
            for option, kwargs in chosen:
                group.add_argument(option, **typed(kwargs))


def add_command_flag(parser: Any, name: str, **more: Any) -> None:
    """A command's number that is not a setting (`CommandFlags`), with its type, default
    and help from there."""
    parser.add_argument("--" + name.replace("_", "-"), **typed(FLAGS["commands"][name]) | more)


# ---------------------------------------------------------------- the generated table


def argument(one: Setting, help_text: str, **kwargs: Any) -> dict[str, Any]:
    """argparse's keywords for a flag: its type (by name), choices or action, and help."""
    kwargs["help"] = help_text
    if one.kind is bool:
        kwargs["action"] = "store_true"
    elif one.choices:
        kwargs["choices"] = list(one.choices)
    elif one.is_list:
        kwargs.update(action="append", metavar="VALUE")
    elif one.kind in (int, float):
        kwargs.update(type=one.kind.__name__, metavar="N" if one.kind is int else "X")
    return kwargs


def shown_default(one: Setting) -> str:
    return "" if one.default in (None, [], {}) or one.kind is bool else f" (default {one.default})"


def flag_table() -> dict[str, Any]:
    """What cli/flag_table.json holds, made from the fields: the sections' titles, each
    setting's flag (option and argparse's keywords), and each command number's keywords; and
    the strategies' names, which the help lists (the registry's dataclasses stay unloaded)."""
    from mulligan import strategies
    from mulligan.settings.fields import command_flag, settings
    from mulligan.settings.run_config import SECTIONS, CommandFlags, section_model

    titles = [
        [section, (section_model(section).__doc__ or "").strip().splitlines()[0].rstrip(".")]
        for section in SECTIONS
    ]
    rows = []
    for one in settings():
        if one.flag:
            shown = one.help + shown_default(one)
            rows.append([one.path, one.option, argument(one, shown, dest=one.flag, default=None)])
    numbers = {
        name: argument(one, one.help, default=one.default)
        for name in CommandFlags.model_fields
        for one in [command_flag(name)]
    }
    named = {
        "names": list(strategies.NAMES),
        "default_study": list(strategies.DEFAULT_STUDY),
        "transfer_study": list(strategies.TRANSFER_STUDY),
    }
    return {"sections": titles, "settings": rows, "commands": numbers, "strategies": named}


def flag_table_text() -> str:
    """The text of cli/flag_table.json."""
    return json.dumps(flag_table(), indent=1) + "\n"
