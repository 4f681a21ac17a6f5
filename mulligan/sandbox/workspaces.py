"""Scratch workspaces: a fresh directory laid out from a task's files, removed after (in
TMPDIR, marked as this process's: marked.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from mulligan.errors import UserError
from mulligan.sandbox.marked import marked_directory


@contextlib.contextmanager
def ScratchWorkspace(files: dict[str, str] | None, enabled: bool = True) -> Iterator[Path | None]:
    """A fresh temporary directory with the given files laid out, removed on exit.

    With `enabled=False` it yields None: the task needs no workspace.
    """
    if not enabled:
        yield None
        return
    with marked_directory("mulligan-ws-") as root:
        for relative, content in (files or {}).items():
            target = (root / relative).resolve()
            if not target.is_relative_to(root):
                raise UserError(f"workspace file {relative!r} would lie outside the workspace")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        yield root
