"""Every prompt is a template file in this folder, rendered with strict undefined variables.

Set MULLIGAN_PROMPTS_DIR to a folder of your own files with the same names to replace any.
Every variable is neutralised (mulligan.untrusted) before it is rendered: what a prompt
quotes (tasks, answers, trajectories, lessons, feedback) cannot pose as a chat turn.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any

import jinja2

from mulligan.errors import UserError
from mulligan.untrusted import neutralise_all

PACKAGE_DIR = Path(__file__).parent


def _search_path() -> list[str]:
    override = os.environ.get("MULLIGAN_PROMPTS_DIR")
    return [override, str(PACKAGE_DIR)] if override else [str(PACKAGE_DIR)]


def quote(text: object) -> str:
    """Every line of `text` quoted (`> `), whatever its line breaks: quoted data stays quoted."""
    return "\n".join(f"> {line}".rstrip() for line in str(text).strip().splitlines() or [""])


@functools.lru_cache(maxsize=8)
def _environment_for(search_path: tuple[str, ...]) -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(list(search_path)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
        auto_reload=True,  # an edited prompt file is picked up
    )
    environment.filters["quote"] = quote
    environment.filters["quoted"] = quote
    return environment


def render(name: str, /, **variables: Any) -> str:
    """Render `prompts/NAME.md` with the (neutralised) variables; a missing one is an error."""
    try:
        template = _environment_for(tuple(_search_path())).get_template(f"{name}.md")
    except jinja2.TemplateNotFound as exc:
        raise UserError(f"prompt file {name}.md not found in {_search_path()}") from exc
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"prompt file {exc.filename}, line {exc.lineno}: {exc.message}") from exc
    return template.render(**neutralise_all(variables)).strip()


def prompt_hashes() -> dict[str, str]:
    """sha256 (first 12 hex digits) of every prompt file in use, for run manifests."""
    hashes: dict[str, str] = {}
    for folder in reversed(_search_path()):
        for path in sorted(Path(folder).glob("*.md")):
            hashes[path.stem] = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return hashes
