"""What each setting's one pydantic field (settings/run_config.py) says about everything else:
its flag, its environment variables, the values its bounds allow (in words), its help and
default as shown. The parser, the config loader, `mulligan config show` and the settings
reference all read settings through `setting()`; nothing else defines one.

Imports only pydantic (through run_config), so the parser can use it for `--help`.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from mulligan.settings.run_config import SECTIONS, CommandFlags, every_path, section_model

NUMBER_WORDS = {"ttl_days": "a number of days", "check_timeout": "a number of seconds"}
"""How a bound names a number whose unit is not in its field's name."""


@dataclass(frozen=True)
class Setting:
    path: str
    """`section.field`."""
    info: FieldInfo

    @property
    def section(self) -> str:
        return self.path.partition(".")[0]

    @property
    def name(self) -> str:
        return self.path.partition(".")[2]

    def extra(self, key: str, default: Any = None) -> Any:
        found = self.info.json_schema_extra
        return found.get(key, default) if isinstance(found, dict) else default

    @property
    def kind(self) -> Any:
        """The field's type without `None` (a setting that may be unset)."""
        annotation = self.info.annotation
        if get_origin(annotation) in (typing.Union, types.UnionType):
            kept = [a for a in get_args(annotation) if a is not type(None)]
            return kept[0] if len(kept) == 1 else annotation
        return annotation

    @property
    def choices(self) -> tuple[str, ...] | None:
        return get_args(self.kind) if get_origin(self.kind) is Literal else None

    @property
    def is_list(self) -> bool:
        return get_origin(self.kind) is list

    @property
    def flag(self) -> str | None:
        """The argparse dest of its flag (`max_steps` for --max-steps), or None: only a
        settings file (or a variable) sets it."""
        if get_origin(self.kind) is dict:
            return None
        named = self.extra("flag", self.name)
        return None if named is None else str(named).replace("-", "_")

    @property
    def option(self) -> str | None:
        return None if self.flag is None else "--" + self.flag.replace("_", "-")

    @property
    def env(self) -> tuple[str, ...]:
        """Its environment variables, the first set one winning: MULLIGAN_<FLAG> (or
        <FIELD>, without a flag) unless the field names others (`ENV(...)`); none for a list
        or a table."""
        named = self.extra("env")
        if named is not None:
            return tuple(named)
        if get_origin(self.kind) in (list, dict):  # not a string
            return ()
        base = self.flag or self.name
        if self.inverted:  # --no-compression: MULLIGAN_COMPRESSION=off
            base = base.removeprefix("no_")
        return (f"MULLIGAN_{base.upper()}",)

    @property
    def inverted(self) -> bool:
        """A flag that turns a setting on by default off (`--no-compression`)."""
        return self.kind is bool and self.info.default is True

    @property
    def default(self) -> Any:
        if self.info.default_factory is not None:
            return self.info.default_factory()  # type: ignore[call-arg]
        return self.info.default

    @property
    def help(self) -> str:
        return self.info.description or ""

    def bounds(self) -> dict[str, float]:
        return {
            key: float(getattr(item, key))
            for item in self.info.metadata
            for key in BOUND_WORDS
            if getattr(item, key, None) is not None
        }

    def words(self) -> str:
        """What the setting takes, as its bound says it: "a whole number at least 1"."""
        return number_words(self.what(), self.bounds())

    def what(self) -> str:
        return NUMBER_WORDS.get(self.name, "a whole number" if self.kind is int else "a number")


BOUND_WORDS = {"ge": "at least", "gt": "above", "le": "at most", "lt": "below"}


def number_words(what: str, bounds: dict[str, float]) -> str:
    """What a number takes, as its bounds say it (a field has at most one lower and one
    upper bound): "a number at least 0 and at most 2"."""
    limits = " and ".join(
        f"{word} {bounds[key]:g}" for key, word in BOUND_WORDS.items() if key in bounds
    )
    return " ".join(filter(None, [what, limits]))


def said(one: Setting, error: Any) -> str:
    """A pydantic error in the words the setting's flag uses ("must be a whole number at
    least 1"), or pydantic's own message."""
    if error["type"] == "finite_number":
        return f"must be a finite {one.words().removeprefix('a ')}"
    if error["type"] in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"must be {one.words()}"
    return str(error["msg"]).removeprefix("Value error, ")


def problem_of(one: Setting, value: Any) -> str | None:
    """What pydantic finds wrong with `value` for this setting or command number, in the
    words its flag uses; None when it fits (the bounds are the field's, checked by pydantic
    alone)."""
    model = CommandFlags if one.section == "command" else section_model(one.section)
    try:
        model.model_validate({one.name: value})
    except ValidationError as exc:
        return "; ".join(said(one, e) for e in exc.errors())
    return None


def setting(path: str) -> Setting:
    section, _, name = path.partition(".")
    return Setting(path, section_model(section).model_fields[name])


def settings(sections: tuple[str, ...] = SECTIONS) -> list[Setting]:
    return [setting(path) for path in every_path() if path.partition(".")[0] in sections]


def command_flag(name: str) -> Setting:
    """A command's number that is not a setting (`CommandFlags`), read like one."""
    return Setting(f"command.{name}", CommandFlags.model_fields[name])


def bounded_flags() -> dict[str, Setting]:
    """Every number a flag takes, setting or not, by argparse dest."""
    found = {name: command_flag(name) for name in CommandFlags.model_fields}
    return {**found, **{s.flag: s for s in settings() if s.flag and s.bounds()}}


def flag_of(path: str) -> str | None:
    """The argparse dest that sets `section.field`, if a flag does."""
    return setting(path).flag
