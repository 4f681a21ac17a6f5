"""Settings: command-line flags, then MULLIGAN_* environment variables, then ./mulligan.toml,
then the per-user config file (platform config dir), then the defaults."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mulligan import sandbox
from mulligan.defaults import CONFIG_FILE, user_config_path
from mulligan.errors import UserError
from mulligan.validate import embedding_problem, read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

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
    temperature: float | None = Field(default=None, ge=0, le=2, allow_inf_nan=False)
    timeout: float = Field(default=120.0, gt=0, allow_inf_nan=False)
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

    @field_validator("base_url")
    @classmethod
    def _is_http(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("the endpoint must be an http:// or https:// URL")
        return url

    @field_validator("embedding")
    @classmethod
    def _known_embedding(cls, spec: str) -> str:
        problem = embedding_problem(spec)
        if problem:
            raise ValueError(problem)
        return spec


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
                merged[key] = _checked(key, os.environ[name], f"environment variable {name}")
                sources[key] = f"${name}"
                break
    given = {
        k: _checked(k, v, "--" + k.replace("_", "-"))
        for k, v in flags.items()
        if v is not None and k in Settings.model_fields
    }
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
    """mulligan.toml, each problem named by file, line and key."""
    text = read_text(path, "settings file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from exc
    for key, value in data.items():
        where = f"{path}:{_line_of_key(text, key)}"
        if key not in Settings.model_fields:
            known = ", ".join(Settings.model_fields)
            raise UserError(f"{where}: unknown key {key!r} (remove it); known keys: {known}")
        _checked(key, value, f"{where}: key {key!r}")
    return data


def _line_of_key(text: str, key: str) -> int | str:
    pattern = re.compile(rf"^\s*\[*\s*[\"']?{re.escape(key)}[\"']?\s*[=\]]")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return "?"


def _checked(key: str, value: Any, where: str) -> Any:
    """One setting on its own, so a bad value is named by where it came from."""
    try:
        Settings.model_validate({key: value})
    except ValidationError as exc:
        problem = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        shown = "" if key == "api_key" else f" (got {value!r:.60})"  # never print a secret
        raise UserError(f"{where}: {problem}{shown}") from exc
    return value


def endpoint_configured(settings: Settings) -> bool:
    return bool(settings.base_url or settings.api_key)
