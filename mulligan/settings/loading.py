"""Where the run configuration comes from (settings/run_config.py): command-line flags, then
MULLIGAN_* environment variables, then ./mulligan.toml, then the per-user config file
(platform config dir), then the defaults; each value's source is kept."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mulligan.defaults import CONFIG_FILE, user_config_path
from mulligan.errors import UserError
from mulligan.inputs.paths import read_text
from mulligan.settings.fields import problem_of, setting, settings
from mulligan.settings.run_config import (
    LEGACY_KEYS,
    SECTIONS,
    EndpointSection,
    RunConfig,
    section_fields,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

OTHER_VARIABLES = (
    "MULLIGAN_CONFIG", "MULLIGAN_PRICES", "MULLIGAN_SANDBOX", "MULLIGAN_SANDBOX_REMOUNT",
    "MULLIGAN_LOCAL", "MULLIGAN_DATA_DIR", "MULLIGAN_MINILM_DIR", "MULLIGAN_PROMPTS_DIR",
    "MULLIGAN_TRACE", "MULLIGAN_REPORT_FD",
)  # fmt: skip
"""The MULLIGAN_* variables read elsewhere than the settings (the box, the local model, the
data and model folders, and what mulligan hands its own child processes)."""

NO_ENDPOINT = (
    "no model endpoint configured: pass --base-url URL (or set OPENAI_BASE_URL) for a local "
    "server, --api-key KEY (or OPENAI_API_KEY) for a hosted one, and --model NAME "
    "(or MULLIGAN_MODEL); or try `mulligan demo`, which needs none"
)


def load_config(
    flags: dict[str, Any],
    config_path: Path | None = None,
    defaults: dict[str, Any] | None = None,
) -> RunConfig:
    """Merge the sources, the first that gives a value winning: flags, MULLIGAN_* variables,
    ./mulligan.toml, the user file, `defaults` (a command's own, by `section.field`), then
    the model's defaults. `config.source_of(path)` says where each value came from."""
    path = config_path or Path.cwd() / CONFIG_FILE
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    files: list[str] = []

    def put(where: str, key: str, value: Any, checked_as: str) -> None:
        merged[key] = _checked(key, value, checked_as)
        sources[key] = where

    for key, value in (defaults or {}).items():
        put("this command's default", key, value, f"the default of {key}")
    named = os.environ.get("MULLIGAN_CONFIG")
    if named and not user_config_path().is_file():
        raise UserError(
            f"MULLIGAN_CONFIG names {named}, which is not a file: create it, fix the name, "
            "or unset MULLIGAN_CONFIG"
        )
    for file in (user_config_path(), path):  # the project's file over the user's
        if file.exists():
            files.append(str(file))  # it may hold an API key: the box never reads it
            for key, (value, line, written) in _read_toml(file).items():
                put(f"{file}:{line}", key, value, f"{file}:{line}: key {written}")
    for one in settings():
        for name in one.env:
            if os.environ.get(name):
                put(f"${name}", one.path, os.environ[name], f"environment variable {name}")
                break
    _warn_unknown_variables()
    for one in settings():
        value = flags.get(one.flag) if one.flag else None
        if value is not None and value is not False:
            put(str(one.option), one.path, not value if one.inverted else value, str(one.option))
    nested: dict[str, dict[str, Any]] = {}
    for key, value in merged.items():
        section, _, name = key.partition(".")
        nested.setdefault(section, {})[name] = value
    try:
        config = RunConfig.model_validate(nested)
    except ValidationError as exc:  # each value alone passed: a combination failed
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']} "
            f"(from {sources.get('.'.join(map(str, e['loc'][:2])), 'the defaults')})"
            for e in exc.errors()
        )
        raise UserError(f"settings: {problems}") from exc
    config._sources, config._files = sources, tuple(files)
    return config


def known_variables() -> set[str]:
    return {name for one in settings() for name in one.env} | set(OTHER_VARIABLES)


def _warn_unknown_variables() -> None:
    """A MULLIGAN_* variable no part of mulligan reads is named, with the one it looks like."""
    import difflib
    import logging

    known = known_variables()
    for name in sorted(n for n in os.environ if n.startswith("MULLIGAN_") and n not in known):
        near = difflib.get_close_matches(name, known, n=1)
        logging.getLogger("mulligan").warning(
            "environment variable %s is not one mulligan reads; it is ignored%s", name,
            f" (did you mean {near[0]}?)" if near else " (`mulligan config reference` lists them)",
        )  # fmt: skip


def _read_toml(path: Path) -> dict[str, tuple[Any, int | str, str]]:
    """mulligan.toml as `section.field` -> (value, line, the key as written), each problem
    named by file, line and key. Sections are tables (`[budget]`); the endpoint's, actor's
    and run's settings may also stand at the top (`model = ...`), as before sections."""
    text = read_text(path, "settings file")
    fix = "write `key = value` lines, text in quotes, each key and [table] once"
    try:
        data = tomllib.loads(text)
    except RecursionError as exc:
        raise UserError(f"{path}: not valid TOML (nested too deeply); {fix}") from exc
    except ValueError as exc:  # "Cannot overwrite a value (at line 3, column 9)"
        if not isinstance(exc, tomllib.TOMLDecodeError):  # a number of thousands of digits
            raise UserError(f"{path}: not valid TOML ({str(exc).split(';')[0]}); {fix}") from exc
        at = re.fullmatch(r"(.*) \(at (?:line (\d+), column \d+|end of document)\)", str(exc))
        reason, number = (at.group(1), int(at.group(2) or 0)) if at else (str(exc), 0)
        number = number or len(text.rstrip().split("\n"))  # at the end: the last line written
        written = text.split("\n")[number - 1].strip()
        raise UserError(f"{path}:{number}: not valid TOML ({reason}): {written!r}; {fix}") from exc
    found: dict[str, tuple[Any, int | str, str]] = {}

    def keep(setting: str, value: Any, line: int | str, written: str) -> None:
        if setting in found:  # `model = ...` at the top and again in [endpoint]
            raise UserError(
                f"{path}:{line}: {written} sets {setting} again (as {found[setting][2]} at "
                f"{path.name}:{found[setting][1]}); keep one of them"
            )
        found[setting] = (value, line, written)

    for key, value in data.items():
        if key in LEGACY_KEYS and not (key in SECTIONS and isinstance(value, dict)):
            # `memory = "DIR"` is run.memory (as before sections); `[memory]` is the section
            keep(LEGACY_KEYS[key], value, _line_of(text, key), repr(key))
        elif key in SECTIONS and not isinstance(value, dict):
            raise UserError(
                f"{path}:{_line_of(text, key)}: [{key}] is a table: write `[{key}]` on a line "
                f"of its own and its keys below it, not `{key} = {value!r:.30}`"
            )
        elif key in SECTIONS:
            for name, inner in value.items():
                line = _line_of(text, name, section=key)
                if name not in section_fields(key):
                    known = ", ".join(section_fields(key))
                    raise UserError(
                        f"{path}:{line}: unknown key {name!r} in [{key}] (remove it); "
                        f"known keys there: {known}"
                    )
                keep(f"{key}.{name}", inner, line, f"{name!r} in [{key}]")
        else:
            known = ", ".join([*(f"[{s}]" for s in SECTIONS), *LEGACY_KEYS])
            raise UserError(
                f"{path}:{_line_of(text, key)}: unknown key {key!r} (remove it); known: {known}"
            )
    return found


def _line_of(text: str, key: str, section: str | None = None) -> int | str:
    """The line that sets `key`: inside `[section]` when given, else as `section.key = `,
    in `section = {...}` or as the table `[section.key]`."""
    pattern = re.compile(rf"^\s*\[*\s*[\"']?{re.escape(key)}[\"']?\s*[=\]]")
    header = re.compile(rf"^\s*\[\s*([\"']?){re.escape(section)}\1\s*\]") if section else None
    inside = header is None
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if header is not None and line.lstrip().startswith("["):
            inside = bool(header.match(line))
            continue
        if inside and pattern.match(line):
            return number
    if section is None:
        return "?"
    elsewhere = re.compile(
        rf"^\s*\[?\s*{re.escape(section)}\s*\.\s*{re.escape(key)}\s*[=\]]"  # dotted, sub-table
        rf"|^\s*{re.escape(section)}\s*=\s*\{{.*\b{re.escape(key)}\b"  # inline table
    )
    return next((n for n, line in enumerate(lines, start=1) if elsewhere.match(line)), "?")


def _checked(key: str, value: Any, where: str) -> Any:
    """One setting on its own, so a bad value is named by where it came from."""
    one = setting(key)
    shown = "" if one.name == "api_key" else f" (got {value!r:.60})"  # never print a secret
    problem = problem_of(one, value)
    if problem:
        raise UserError(f"{where}: {problem}{shown}")
    given = value if isinstance(value, list) else [value]
    flag = next((item for item in given if isinstance(item, bool)), None)
    if flag is not None and one.kind is not bool:  # pydantic reads true as 1, in a list too
        raise UserError(f"{where}: a number is needed here, not {str(flag).lower()}")
    return value


def endpoint_configured(settings: EndpointSection) -> bool:
    return bool(settings.base_url or settings.api_key)
