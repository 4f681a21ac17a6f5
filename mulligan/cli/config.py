"""`mulligan config show`: every setting of the run configuration, its value, and where the
value came from; `mulligan config reference`: the settings reference (docs/settings.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mulligan.cli.output import table
from mulligan.defaults import CONFIG_FILE, user_config_path
from mulligan.settings.loading import load_config
from mulligan.settings.run_config import SECRETS, every_path


def shown(key: str, value: Any) -> Any:
    """A value as shown to people: keys masked but for their last four characters."""
    return "…" + value[-4:] if key in SECRETS and isinstance(value, str) and value else value


def cmd_config(args: argparse.Namespace) -> int:
    if args.action == "reference":
        from mulligan.cli.reference import settings_reference

        sys.stdout.write(settings_reference())
        return 0
    config = load_config({})
    values = config.model_dump(mode="json")
    rows = []
    for path in every_path():
        section, _, name = path.partition(".")
        rows.append((path, shown(path, values[section][name]), config.source_of(path)))
    if args.json:
        files = {"user": str(user_config_path()), "project": str(Path.cwd() / CONFIG_FILE)}
        settings_json = {k: {"value": v, "from": s} for k, v, s in rows}
        print(json.dumps({"files": files, "settings": settings_json}, default=str))
        return 0
    text = [
        [key, json.dumps(value, default=str, ensure_ascii=False), source]
        for key, value, source in rows
    ]
    plain = [f"{key} = {value}  ({source})" for key, value, source in text]
    table(["setting", "value", "from"], text, plain, sys.stdout)
    print(f"files read, later over earlier: {user_config_path()}, ./{CONFIG_FILE}", file=sys.stderr)
    return 0
