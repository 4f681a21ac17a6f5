"""Names, defaults and paths that the command line shows before it does any work.

Kept free of heavy imports (no pydantic, chromadb, openai, numpy) so that every
`--help` starts fast; the modules that use these values import them from here."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Literal

MIN_SIMILARITY = 0.35
"""Below this cosine similarity to the task, a stored lesson is not retrieved: with MiniLM it
kept 88% of related lessons and 5% of unrelated ones (benchmarks/similarity_floor.py)."""

LESSON_BUDGET = 2000
"""The playbook a transfer study's curator keeps, at most, in estimated tokens."""
MERGE_SIMILARITY = 0.85
"""The curator merges lessons at least this similar (cosine) into one."""

Carry = Literal["full", "lessons"]

DESIGNS = ("paired", "independent")

DEFAULT_MEMORY = "~/.mulligan"

DATA_ENV = "MULLIGAN_DATA_DIR"
DATASET_NAMES = ("mbpp", "hotpotqa")

CONFIG_FILE = "mulligan.toml"


def user_config_path() -> Path:
    """The per-user config file: $MULLIGAN_CONFIG, else the platform's config folder
    (Linux: $XDG_CONFIG_HOME or ~/.config; macOS: ~/Library/Application Support;
    Windows: %APPDATA%) / mulligan / config.toml."""
    if os.environ.get("MULLIGAN_CONFIG"):
        return Path(os.environ["MULLIGAN_CONFIG"]).expanduser()
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "mulligan" / "config.toml"


MAX_CHECK_SECONDS = 86_400.0
"""The longest a check may run (a day): its time and CPU limits must fit the system's."""
