"""Scratch workspaces: a fresh directory laid out from a task's files, removed after."""

from __future__ import annotations

import tempfile
from pathlib import Path

from mulligan.errors import UserError


class ScratchWorkspace:
    """A fresh temporary directory with the given files laid out, removed on exit.

    With `enabled=False` it yields None: the task needs no workspace.
    """

    def __init__(self, files: dict[str, str] | None, enabled: bool = True) -> None:
        self.files = files or {}
        self.enabled = enabled
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> Path | None:
        if not self.enabled:
            return None
        self._dir = tempfile.TemporaryDirectory(prefix="mulligan-ws-")
        root = Path(self._dir.name).resolve()
        for relative, content in self.files.items():
            target = (root / relative).resolve()
            if not target.is_relative_to(root):
                self._dir.cleanup()
                raise UserError(f"workspace file {relative!r} would lie outside the workspace")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        return root

    def __exit__(self, *exc: object) -> None:
        if self._dir is not None:
            self._dir.cleanup()
