"""Unified diffs between two snapshots of a directory, and applying them, all or nothing.

The text is git's format (`git apply` and `patch -p1` read it); `apply_diff` reads what
`unified_diff` writes and refuses, naming the file, any change that does not apply cleanly.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from mulligan.errors import UserError

MAX_DIFF_BYTES = 1 << 20
"""Files larger than this are reported as changed, not diffed."""


@dataclass(frozen=True)
class Link:
    target: str


Entry = bytes | Link
Snapshot = dict[str, Entry]
"""Relative path -> file content (or symlink target)."""


def _text(entry: Entry | None) -> list[str] | None:
    """The entry's lines, or None when it is not diffable text."""
    if entry is None:
        return []
    if isinstance(entry, Link) or len(entry) > MAX_DIFF_BYTES or b"\0" in entry:
        return None
    try:
        return lines_of(entry.decode())
    except UnicodeDecodeError:
        return None


def lines_of(text: str) -> list[str]:
    """Lines split at "\\n" only, each keeping it (str.splitlines splits at \\f and more)."""
    return re.findall(r"[^\n]*\n|[^\n]+", text)


def unified_diff(before: Snapshot, after: Snapshot) -> str:
    """git-style unified diff text (`git apply` and `patch -p1` read it too)."""
    out: list[str] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        out.append(f"diff --git a/{path} b/{path}\n")
        if old is None:
            out.append("new file mode 100644\n")
        elif new is None:
            out.append("deleted file mode 100644\n")
        old_lines, new_lines = _text(old), _text(new)
        if old_lines is None or new_lines is None:
            out.append(f"Binary files a/{path} and b/{path} differ\n")
            continue
        hunks = list(
            difflib.unified_diff(
                old_lines,
                new_lines,
                "/dev/null" if old is None else f"a/{path}",
                "/dev/null" if new is None else f"b/{path}",
            )
        )
        for line in hunks:
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class FilePatch:
    path: str
    new: bool = False
    deleted: bool = False
    binary: bool = False
    hunks: list[tuple[int, list[str]]] = field(default_factory=list)
    """(old start line, lines each starting with ' ', '-', '+' or '\\')."""


def parse_diff(text: str) -> list[FilePatch]:
    patches: list[FilePatch] = []
    for line in lines_of(text):
        if line.startswith("diff --git a/"):
            patches.append(FilePatch(line.split(" b/", 1)[0][len("diff --git a/") :]))
        elif not patches:
            raise UserError("the diff does not start with a `diff --git` line")
        elif line.startswith("new file mode"):
            patches[-1].new = True
        elif line.startswith("deleted file mode"):
            patches[-1].deleted = True
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


def apply_diff(diff: str, directory: Path) -> tuple[list[str], list[str]]:
    """Apply a diff made by `unified_diff`; all or nothing. Returns (applied, skipped binaries).

    Raises UserError naming the file when a change does not apply cleanly.
    """
    planned: dict[Path, str | None] = {}
    applied, skipped = [], []
    root = directory.resolve()
    for patch in parse_diff(diff):
        target = (root / patch.path).resolve()
        if not target.is_relative_to(root) or ".." in Path(patch.path).parts:
            raise UserError(f"{patch.path}: the diff leads outside {directory}")
        if patch.binary:
            skipped.append(patch.path)
            continue
        if patch.new and (target.exists() or target.is_symlink()):
            raise UserError(f"{patch.path}: the diff creates it, but it exists in {directory}")
        if not patch.new and not target.is_file():
            raise UserError(f"{patch.path}: the diff changes it, but it is not in {directory}")
        old = "" if patch.new else target.read_bytes().decode(errors="surrogateescape")
        new = "".join(_patched(patch.path, lines_of(old), patch.hunks))
        planned[target] = None if patch.deleted else new
        applied.append(patch.path)
    for target, content in planned.items():
        if content is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode(errors="surrogateescape"))
    return applied, skipped
