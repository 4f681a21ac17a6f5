"""A MkDocs hook: the study pages under results/ become the site's results/ pages.

MkDocs serves only files under docs/, and the results live in their own folder at the top of
the project; this adds each file there (pages, outcome files and the text files they quote) to
the build as results/NAME, so the guide links to them and `mkdocs build --strict` checks
those links like any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]


def on_files(files: Files, config: Any) -> Files:
    for path in sorted((ROOT / "results").rglob("*")):
        if path.is_file() and path.suffix in (".md", ".jsonl", ".txt"):
            src = path.relative_to(ROOT).as_posix()
            files.append(File(src, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files
