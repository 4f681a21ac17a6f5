"""Settings: command-line flags, then MULLIGAN_* environment variables, then ./mulligan.toml,
then the per-user config file (platform config dir), then the defaults."""

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


def load_settings(flags: dict[str, Any], config_path: Path | None = None) -> Settings:
    """Merge the sources, the first that gives a value winning."""
    return settings_and_sources(flags, config_path)[0]


def settings_and_sources(
    flags: dict[str, Any], config_path: Path | None = None
) -> tuple[Settings, dict[str, str]]:
    """The settings and, for each one given, where its value came from."""
    path = config_path or Path.cwd() / CONFIG_FILE
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for file in (user_config_path(), path):  # the project's file over the user's
        if file.exists():
            sandbox.hide(file)  # it may hold an API key: the box never reads it
            found = _read_toml(file)
            merged.update(found)
            sources.update({key: str(file) for key in found})
    for key, names in ENVIRONMENT.items():
        for name in names:
            if os.environ.get(name):
                merged[key] = os.environ[name]
                sources[key] = f"${name}"
                break
    given = {k: v for k, v in flags.items() if v is not None and k in Settings.model_fields}
    merged.update(given)
    sources.update({key: f"--{key.replace('_', '-')}" for key in given})
    try:
        return Settings.model_validate(merged), sources
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']} "
            f"(from {sources.get(str(e['loc'][0]), 'the defaults')})"
            for e in exc.errors()
        )
        raise UserError(f"settings: {problems}") from exc


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
