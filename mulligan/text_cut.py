"""Cutting long text down for a prompt, a log line or a terminal, the cut always marked.

(The python_tests harness keeps its own one-line cut: it runs in the box as a standalone
script and imports nothing of mulligan.)
"""

from __future__ import annotations

import re


def head(text: str, limit: int) -> str:
    """The text, or its head with the cut marked when it is longer than `limit`."""
    text = text.strip()
    return text if len(text) <= limit else f"{text[: limit - 20]} [... {len(text) - limit} cut]"


def head_and_tail(text: str, limit: int) -> str:
    """The text, or its first two thirds and last third of `limit` characters, the cut marked
    between them: the start of an output says what ran, the end how it ended."""
    if len(text) <= limit:
        return text
    start = limit * 2 // 3
    end = limit - start
    return f"{text[:start]}\n[... {len(text) - limit} characters cut ...]\n{text[-end:]}"


def last_lines(text: str, count: int, *, mark: bool = False) -> list[str]:
    """The last `count` lines of the text; with `mark`, a first line says how many were cut."""
    lines = text.strip().splitlines()
    kept = lines[-count:] if count > 0 else []
    if mark and len(lines) > len(kept):
        return [f"[... {len(lines) - len(kept)} lines cut]", *kept]
    return kept


def id_words(text: str, count: int, longest: int = 32) -> list[str]:
    """The first `count` words of the text (lower-case letters and digits), each cut to
    `longest`: the readable part of an id made from a text, short however long the text."""
    return [word[:longest] for word in re.findall(r"[a-z0-9]+", text.lower())[:count]]
