"""`solve` below the command line: copies of a project per attempt, their diffs, applying one.

Each attempt works in a fresh copy of the user's directory that mulligan makes (so the box
may write there); the directory itself is only read, and written by `apply_diff` alone.
A git repository is copied as its working tree shows it, minus what `.gitignore` ignores;
any other directory whole. Caches and virtual environments (JUNK) are never copied.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import re
import stat
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mulligan import sandbox
from mulligan.errors import UserError
from mulligan.evaluator import Evaluator
from mulligan.llm.base import ChatModel
from mulligan.schema import Attempt, Task, Verdict

JUNK_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
    | {".tox", ".nox", ".venv", "venv", "node_modules"}
)
JUNK_SUFFIXES = (".pyc", ".pyo")
MAX_DIFF_BYTES = 1 << 20
"""Files larger than this are reported as changed, not diffed."""


@dataclass(frozen=True)
class Link:
    target: str


Entry = bytes | Link
UNREADABLE = b"\0(unreadable)"
Snapshot = dict[str, Entry]
"""Relative path -> file content (or symlink target)."""


def _junk(relative: str) -> bool:
    parts = relative.split("/")
    return (
        any(p in JUNK_DIRS for p in parts[:-1])
        or parts[-1] in JUNK_DIRS
        or (relative.endswith(JUNK_SUFFIXES))
    )


def is_git_repository(directory: Path) -> bool:
    """Inside a git working tree, and not in a part of it that git ignores."""

    def git(*argv: str) -> int:
        try:
            done = subprocess.run(
                ["git", "-C", str(directory), *argv], capture_output=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            return -1
        return done.returncode

    return git("rev-parse", "--show-prefix") == 0 and git("check-ignore", "-q", ".") == 1


def _git_files(directory: Path) -> list[str]:
    done = subprocess.run(
        [
            "git",
            "-C",
            str(directory),
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ],
        capture_output=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise UserError(f"{directory}: git ls-files failed: {done.stderr.decode().strip()}")
    return sorted({p for p in done.stdout.decode().split("\0") if p})


def _walk_files(directory: Path) -> list[str]:
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d not in JUNK_DIRS)
        base = Path(root).relative_to(directory)
        found += [(base / name).as_posix() for name in files]
        # symlinked directories are listed as entries, not entered
        found += [(base / d).as_posix() for d in dirs if (Path(root) / d).is_symlink()]
        dirs[:] = [d for d in dirs if not (Path(root) / d).is_symlink()]
    return sorted(found)


@dataclass
class Project:
    """The user's directory, read but never written (except by `apply_diff`)."""

    directory: Path
    skip: list[Path] = field(default_factory=list)
    """Directories inside the project that are not part of it (mulligan's own memory)."""

    def __post_init__(self) -> None:
        self.directory = self.directory.resolve()
        self.git = is_git_repository(self.directory)

    def files(self) -> list[str]:
        listed = _git_files(self.directory) if self.git else _walk_files(self.directory)
        return [p for p in listed if not _junk(p) and not self._skipped(p)]

    def _skipped(self, relative: str) -> bool:
        path = self.directory / relative
        return any(path == s or path.is_relative_to(s) for s in self.skip)

    def snapshot(self) -> Snapshot:
        return read_tree(self.directory, self.files())

    def ignored(self, paths: list[str]) -> set[str]:
        """Which of these (new) paths the project ignores: junk, or .gitignore'd in a repo."""
        ignored = {p for p in paths if _junk(p) or self._skipped(p)}
        rest = [p for p in paths if p not in ignored]
        if self.git and rest:
            try:
                done = subprocess.run(
                    [
                        "git",
                        "-C",
                        str(self.directory),
                        "check-ignore",
                        "--no-index",
                        "-z",
                        "--stdin",
                    ],
                    input="\0".join(rest).encode() + b"\0",
                    capture_output=True,
                    timeout=60,
                )
            except (OSError, subprocess.TimeoutExpired):
                return ignored  # shown in the diff rather than lost
            ignored |= {p for p in done.stdout.decode(errors="replace").split("\0") if p}
        return ignored


def read_tree(root: Path, files: list[str], strict: bool = True) -> Snapshot:
    """The files' contents; an unreadable one is an error (`strict`) or shown as binary."""
    snapshot: Snapshot = {}
    for relative in files:
        path = root / relative
        try:
            info = path.lstat()
        except FileNotFoundError:  # tracked but deleted in the working tree
            continue
        if stat.S_ISLNK(info.st_mode):
            snapshot[relative] = Link(os.readlink(path))
        elif stat.S_ISREG(info.st_mode):
            try:
                snapshot[relative] = path.read_bytes()
            except PermissionError as exc:
                if strict:
                    raise UserError(f"{path}: cannot read it ({exc.strerror})") from exc
                snapshot[relative] = UNREADABLE
    return snapshot


def fingerprint(snapshot: Snapshot) -> str:
    digest = hashlib.sha256()
    for relative in sorted(snapshot):
        entry = snapshot[relative]
        content = entry if isinstance(entry, bytes) else f"link:{entry.target}".encode()
        digest.update(relative.encode() + b"\0" + hashlib.sha256(content).digest())
    return digest.hexdigest()


def _mode(path: Path) -> int:
    """The file's permission bits (executable scripts stay executable), writable by us."""
    try:
        return stat.S_IMODE(path.stat().st_mode) | 0o600
    except OSError:
        return 0o644


def write_tree(root: Path, snapshot: Snapshot, modes: dict[str, int]) -> None:
    for relative, entry in snapshot.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(entry, Link):
            target.symlink_to(entry.target)
        else:
            target.write_bytes(entry)
            target.chmod(modes.get(relative, 0o644))


# ---------------------------------------------------------------- copies per attempt


@dataclass
class Copy:
    base: Snapshot
    fingerprint: str


class ProjectCopies:
    """A workspace factory for the loop: each attempt gets a fresh copy of the project."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.copies: dict[Path, Copy] = {}
        self.started: dict[int, str] = {}
        """Trial -> fingerprint of the project when that attempt's copy was made."""

    @contextlib.contextmanager
    def __call__(self, task: Task) -> Iterator[Path]:
        base = self.project.snapshot()
        modes = {
            p: _mode(self.project.directory / p) for p, e in base.items() if isinstance(e, bytes)
        }
        with sandbox.ScratchWorkspace({}) as workspace:
            assert workspace is not None
            write_tree(workspace, base, modes)
            self.copies[workspace] = Copy(base, fingerprint(base))
            try:
                yield workspace
            finally:
                del self.copies[workspace]

    def changes(self, workspace: Path, trial: int) -> str:
        """The unified diff from the copy's start to its present state."""
        copy = self.copies[workspace]
        self.started[trial] = copy.fingerprint
        present = read_tree(workspace, _walk_files(workspace), strict=False)
        new = [p for p in present if p not in copy.base]
        for ignored in self.project.ignored(new):
            del present[ignored]
        return unified_diff(copy.base, present)

    def unchanged_since(self, trial: int) -> bool | None:
        """Whether the project is as it was when this trial began (None: not known here)."""
        if trial not in self.started:
            return None
        return fingerprint(self.project.snapshot()) == self.started[trial]


class ChangeRecordingEvaluator(Evaluator):
    """Records what an attempt changed in its copy, before the checks run there."""

    def __init__(
        self,
        copies: ProjectCopies,
        judge: ChatModel | None = None,
        on_verdict: Callable[[Attempt, Verdict], None] | None = None,
    ) -> None:
        super().__init__(judge)
        self.copies = copies
        self.on_verdict = on_verdict

    def evaluate(self, task: Task, attempt: Attempt, workspace: Path | None = None) -> Verdict:
        if workspace is not None and workspace in self.copies.copies:
            attempt.changes = self.copies.changes(workspace, attempt.trial)
        verdict = super().evaluate(task, attempt, workspace)
        if self.on_verdict:
            self.on_verdict(attempt, verdict)
        return verdict


# ---------------------------------------------------------------- diffs


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
