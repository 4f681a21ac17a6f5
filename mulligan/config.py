"""Settings: command-line flags, then MULLIGAN_* environment variables, then mulligan.toml."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mulligan import sandbox
from mulligan.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_FILE = "mulligan.toml"
NO_ENDPOINT = (
    "no model endpoint configured: pass --base-url URL (or set OPENAI_BASE_URL) for a local "
    "server, --api-key KEY (or OPENAI_API_KEY) for a hosted one, and --model NAME "
    "(or MULLIGAN_MODEL); or try `mulligan demo`, which needs none"
)


class Settings(BaseModel):
    """Everything a command can take from flags, the environment or mulligan.toml."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    temperature: float | None = None
    timeout: float = 120.0
    protocol: Literal["native", "text"] = "native"
    memory: str | None = None
    embedding: str = "minilm"
    price_in: float | None = None
    price_out: float | None = None
    """US dollars per million prompt / completion tokens of the run's model."""
    prices: dict[str, Any] = {}
    """Model name -> {input, output}, dollars per million tokens (`[prices]` in mulligan.toml)."""
    prices_file: str | None = None
    """A JSON file of the same shape (MULLIGAN_PRICES), over `prices`."""
    mcp: list[str] = Field(default_factory=list)
    """Commands that start MCP servers whose tools every task may use."""


ENVIRONMENT = {
    "base_url": ("MULLIGAN_BASE_URL", "OPENAI_BASE_URL"),
    "api_key": ("MULLIGAN_API_KEY", "OPENAI_API_KEY"),
    "model": ("MULLIGAN_MODEL",),
    "temperature": ("MULLIGAN_TEMPERATURE",),
    "timeout": ("MULLIGAN_TIMEOUT",),
    "protocol": ("MULLIGAN_PROTOCOL",),
    "memory": ("MULLIGAN_MEMORY",),
    "embedding": ("MULLIGAN_EMBEDDING",),
    "prices_file": ("MULLIGAN_PRICES",),
}


def load_settings(flags: dict[str, Any], config_path: Path | None = None) -> Settings:
    """Merge the three sources, the first that gives a value winning."""
    path = config_path or Path.cwd() / CONFIG_FILE
    merged: dict[str, Any] = _read_toml(path) if path.exists() else {}
    if path.exists():
        sandbox.hide(path)  # it may hold an API key: the box never reads it
    for key, names in ENVIRONMENT.items():
        for name in names:
            if os.environ.get(name):
                merged[key] = os.environ[name]
                break
    merged.update({k: v for k, v in flags.items() if v is not None and k in Settings.model_fields})
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise UserError(f"settings (flags, MULLIGAN_* variables or {path}): {problems}") from exc


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from exc
    unknown = sorted(set(data) - set(Settings.model_fields))
    if unknown:
        known = ", ".join(Settings.model_fields)
        raise UserError(f"{path}: unknown key(s) {', '.join(unknown)}; known keys: {known}")
    return data


def endpoint_configured(settings: Settings) -> bool:
    return bool(settings.base_url or settings.api_key)
