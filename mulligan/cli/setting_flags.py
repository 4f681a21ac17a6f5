"""Flags derived from the settings' fields (mulligan/settings/run_config.py): a setting's flag takes
its field's type (choices for a Literal, repeatable for a list, on/off for a bool) and help
(its description and default); its bounds are checked after parsing (inputs/flags.py), as
for a value from a file or variable. Nothing here names a setting."""

from __future__ import annotations

import argparse
from typing import Any

from mulligan.settings.fields import Setting, command_flag, settings
from mulligan.settings.run_config import SECTIONS, section_model

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


def takes(command: str, one: Setting) -> bool:
    chosen = COMMAND_SETTINGS.get(command, ())
    if any(item == f"-{one.path}" for item in chosen):
        return False
    wanted = [item for item in chosen if not item.startswith("-")]
    return not wanted or one.section in wanted or one.path in wanted


def shown_default(one: Setting) -> str:
    value = one.default
    if value in (None, [], {}) or one.kind is bool:
        return ""
    return f" (default {value})"


def add_setting_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """A group per section, with the flag of each setting this command takes."""
    for section in SECTIONS:
        chosen = [one for one in settings((section,)) if one.flag and takes(command, one)]
        if not chosen:
            continue
        title = (section_model(section).__doc__ or "").strip().splitlines()[0]
        group = parser.add_argument_group(f"[{section}] {title.rstrip('.')}")
        for one in chosen:
            group.add_argument(str(one.option), **argument(one))


def argument(one: Setting, help_suffix: bool = True) -> dict[str, Any]:
    """argparse's keywords for a field: its type, choices or action, and help."""
    text = one.help + (shown_default(one) if help_suffix else "")
    kwargs: dict[str, Any] = {"dest": one.flag, "help": text, "default": None}
    if one.kind is bool:
        kwargs["action"] = "store_true"
    elif one.choices:
        kwargs["choices"] = one.choices
    elif one.is_list:
        kwargs.update(action="append", metavar="VALUE")
    elif one.kind in (int, float):
        kwargs.update(type=one.kind, metavar="N" if one.kind is int else "X")
    return kwargs


def add_command_flag(parser: Any, name: str, **more: Any) -> None:
    """A command's number that is not a setting (`CommandFlags`), with its type, default
    and help from there."""
    one = command_flag(name)
    kwargs = argument(one, help_suffix=False) | {"default": one.default} | more
    kwargs.pop("dest")
    parser.add_argument("--" + name.replace("_", "-"), **kwargs)
