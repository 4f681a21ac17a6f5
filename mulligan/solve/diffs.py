"""Unified diffs between two snapshots of a directory, and applying them, all or nothing.

The text is git's format (`git apply` and `patch -p1` read it), with git's modes for the
executable bit and symlinks; `apply_diff` reads what `unified_diff` writes and refuses,
naming the file and writing nothing, any change that does not apply cleanly.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Set
from dataclasses import dataclass, field
from pathlib import Path

from mulligan.errors import UserError
from mulligan.solve.journal import Write, apply_whole, content_digest, first_parent

FILE_MODE, EXECUTABLE_MODE, LINK_MODE = "100644", "100755", "120000"
"""The modes git writes: a file, an executable file, a symlink."""
MAX_DIFF_BYTES = 1 << 20
"""Files larger than this are reported as changed, not diffed."""


@dataclass(frozen=True)
class Link:
    target: str


@dataclass(frozen=True)
class Large:
    """A file larger than MAX_DIFF_BYTES, by the digest of its bytes (never held whole)."""

    digest: str


Entry = bytes | Link | Large
Snapshot = dict[str, Entry]
"""Relative path -> file content (or symlink target)."""


def _text(entry: Entry | None) -> list[str] | None:
    """The entry's lines, or None when it is not diffable text."""
    if entry is None:
        return []
    if isinstance(entry, Link):
        return lines_of(entry.target)  # as git writes a link: its target, no newline
    if isinstance(entry, Large) or len(entry) > MAX_DIFF_BYTES or b"\0" in entry:
        return None
    try:
        return lines_of(entry.decode())
    except UnicodeDecodeError:
        return None


def lines_of(text: str) -> list[str]:
    """Lines split at "\\n" only, each keeping it (str.splitlines splits at \\f and more)."""
    return re.findall(r"[^\n]*\n|[^\n]+", text)


def unified_diff(
    before: Snapshot,
    after: Snapshot,
    executable: tuple[Set[str], Set[str]] = (frozenset(), frozenset()),
) -> str:
    """git-style unified diff text (`git apply` and `patch -p1` read it too). `executable`:
    the paths with the executable bit before and after; a change of it is a mode change."""
    out: list[str] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        was, now = executable
        old_mode, new_mode = _mode_of(path, old, was), _mode_of(path, new, now)
        if old == new and old_mode == new_mode:
            continue
        out.append(f"diff --git a/{path} b/{path}\n")
        if old is None:
            out.append(f"new file mode {new_mode}\n")
        elif new is None:
            out.append(f"deleted file mode {old_mode}\n")
        elif old_mode != new_mode:
            out.append(f"old mode {old_mode}\nnew mode {new_mode}\n")
        if old == new:
            continue
        old_lines, new_lines = _text(old), _text(new)
        retyped = None not in (old, new) and isinstance(old, Link) != isinstance(new, Link)
        if old_lines is None or new_lines is None or retyped:
            out.append(f"Binary files a/{path} and b/{path} differ\n")
            continue
        a = "/dev/null" if old is None else f"a/{path}"
        b = "/dev/null" if new is None else f"b/{path}"
        for line in difflib.unified_diff(old_lines, new_lines, a, b):
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _mode_of(path: str, entry: Entry | None, executable: Set[str]) -> str:
    if isinstance(entry, Link):
        return LINK_MODE
    return EXECUTABLE_MODE if path in executable else FILE_MODE


HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class FilePatch:
    path: str
    new: bool = False
    deleted: bool = False
    binary: bool = False
    old_mode: str | None = None
    mode: str | None = None
    """The modes the diff names (git names them only where new, deleted or changed)."""
    hunks: list[tuple[int, list[str]]] = field(default_factory=list)
    """(old start line, lines each starting with ' ', '-', '+' or '\\')."""


def parse_diff(text: str) -> list[FilePatch]:
    patches: list[FilePatch] = []
    for line in lines_of(text):
        if line.startswith("diff --git a/"):
            patches.append(FilePatch(_path_of(line)))
        elif not patches:
            raise UserError("the diff does not start with a `diff --git` line")
        elif line.startswith(("new file mode ", "deleted file mode ", "old mode ", "new mode ")):
            _read_mode(patches[-1], line)
        elif line.startswith("Binary files"):
            patches[-1].binary = True
        elif line.startswith(("--- ", "+++ ")) and not patches[-1].hunks:
            continue
        elif match := HUNK.match(line):
            patches[-1].hunks.append((int(match.group(1)), []))
        elif patches[-1].hunks and line[:1] in (" ", "-", "+", "\\"):
            patches[-1].hunks[-1][1].append(line)
        else:
            raise UserError(f"the diff has a line it cannot read: {line.rstrip()!r:.80}")
    return patches


def _path_of(line: str) -> str:
    """X of `diff --git a/X b/X` (the writer names a path twice; X may hold " b/")."""
    both = line[len("diff --git a/") :].rstrip("\n")
    path = both[: (len(both) - len(" b/")) // 2]
    if both != f"{path} b/{path}":
        raise UserError(f"the diff renames or names no path: {line.rstrip()!r:.80}")
    return path


def _read_mode(patch: FilePatch, line: str) -> None:
    mode = line.split()[-1]
    if mode not in (FILE_MODE, EXECUTABLE_MODE, LINK_MODE):
        raise UserError(f"{patch.path}: the diff gives a mode it cannot apply: {mode}")
    if line.startswith("new file"):
        patch.new, patch.mode = True, mode
    elif line.startswith("deleted file"):
        patch.deleted, patch.old_mode = True, mode
    elif line.startswith("old mode"):
        patch.old_mode = mode
    else:
        patch.mode = mode


def _patched(path: str, old: list[str], hunks: list[tuple[int, list[str]]]) -> list[str]:
    result: list[str] = []
    position = 0
    for start, lines in hunks:
        begin = max(start - 1, 0) if any(x[0] in " -" for x in lines) else start
        if begin < position or begin > len(old):
            raise UserError(f"{path}: the diff does not apply (hunk at line {start})")
        result += old[position:begin]
        position = begin
        last: list[str] | None = None
        for line in lines:
            kind, body = line[0], line[1:]
            if kind == "\\":
                if last is not None and last and last[-1].endswith("\n"):
                    last[-1] = last[-1][:-1]
                continue
            if kind in " -":
                if position >= len(old) or old[position].rstrip("\n") != body.rstrip("\n"):
                    raise UserError(f"{path}: the diff does not apply (line {position + 1})")
                if kind == " ":
                    result.append(old[position])
                    last = result
                else:
                    last = None
                position += 1
            else:
                result.append(body)
                last = result
    return result + old[position:]


def apply_diff(diff: str, directory: Path) -> list[str]:
    """Apply a diff made by `unified_diff`, all or nothing; returns the paths it changed.

    Refused, naming the path, with nothing written: a change that does not apply cleanly
    (the file is not as the diff found it, or a deleted file holds more than the diff
    removes), one that leads outside `directory` or through a symlink, a binary change (the
    text cannot carry it), and any write the system refuses (what was staged is removed).
    Written through a journal (`journal.apply_whole`): a process killed while applying it
    leaves the directory for the next `solve` there to finish or undo, never half of it.
    """
    root = directory.resolve()
    patches = parse_diff(diff)
    binary = [p.path for p in patches if p.binary]
    if binary:
        raise UserError(
            f"{', '.join(binary)}: changed as binary or large files, which a text diff cannot "
            f"carry; nothing applied (the rest applies with `git apply --exclude={binary[0]}`)"
        )
    writes = [_planned(patch, root, directory) for patch in patches]
    deleted = {write.path for write in writes if write.content is None}
    for write in writes:  # where it needs a directory, no file or symlink is in the way
        blocked = None if write.content is None else _in_the_way(write.path, root)
        if blocked is not None and blocked not in deleted:  # deletions come first
            raise UserError(
                f"{write.path}: the diff needs a directory where {directory} has {blocked}, a "
                "file or a symlink; nothing applied"
            )
    apply_whole(root, writes)
    return [write.path for write in writes]


def _bytes(text: str) -> bytes:
    return text.encode(errors="surrogateescape")


def _planned(patch: FilePatch, root: Path, directory: Path) -> Write:
    """The patch's change as the journal writes it: bytes, the diff's mode, a digest of the
    old."""
    parts = Path(patch.path).parts
    if not parts or Path(patch.path).is_absolute() or ".." in parts:
        raise UserError(f"{patch.path}: the diff leads outside {directory}")
    if not patch.new and _in_the_way(patch.path, root):
        raise UserError(f"{patch.path}: the diff leads through a symlink in {directory}")
    target = root / patch.path
    if patch.new and (target.exists() or target.is_symlink()):
        raise UserError(f"{patch.path}: the diff creates it, but it exists in {directory}")
    old_link = not patch.new and target.is_symlink()
    if not patch.new and not old_link and not target.is_file():
        raise UserError(f"{patch.path}: the diff changes it, but it is not in {directory}")
    if patch.old_mode and (patch.old_mode == LINK_MODE) != old_link:
        kind = "symlink" if old_link else "file"
        raise UserError(f"{patch.path}: the diff changes it as it was, not the {kind} it is now")
    old = os.readlink(target) if old_link else None
    if not patch.new and not old_link:
        old = target.read_bytes().decode(errors="surrogateescape")
    new = "".join(_patched(patch.path, lines_of(old or ""), patch.hunks))
    if patch.deleted and new:
        raise UserError(
            f"{patch.path}: the diff deletes it, but it holds lines the diff does not know "
            f"(changed in {directory} since); nothing applied"
        )
    new_link = patch.mode == LINK_MODE if patch.mode else old_link
    return Write(
        patch.path,
        None if patch.deleted else _bytes(new),
        new_link,
        None if not patch.mode or new_link else patch.mode == EXECUTABLE_MODE,
        None if old is None else content_digest(_bytes(old), old_link),
    )


def _in_the_way(path: str, root: Path) -> str | None:
    """The first of the path's parents that is not a real directory (a file, a symlink)."""
    return first_parent(root, path, lambda at: at.is_symlink() or at.exists() and not at.is_dir())
