"""`solve` below the command line: a copy of the project per attempt, and what each changed.

Each attempt works in a fresh copy of the user's directory that mulligan makes (so the box
may write there; in TMPDIR, marked as this process's: sandbox/marked.py); the directory itself is
only read (`diffs.apply_diff` alone writes it).
A git repository is copied as its working tree shows it, minus what `.gitignore` ignores
(repositories inside it, submodules or clones, as theirs show them);
any other directory whole. Caches and virtual environments (JUNK) are never copied.
A file larger than a diff shows (`MAX_DIFF_BYTES`) is copied in pieces and known by its
digest, never held in memory whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mulligan import sandbox
from mulligan.errors import UserError
from mulligan.evaluator import Evaluator
from mulligan.llm.base import ChatModel
from mulligan.sandbox.marked import marked_directory
from mulligan.schema import Attempt, Task, Verdict
from mulligan.solve.diffs import MAX_DIFF_BYTES, Entry, Large, Link, Snapshot, unified_diff

COPY = "mulligan-copy-"
"""What a copy of the project is named in TMPDIR (then a random part)."""
JUNK_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
    | {".tox", ".nox", ".venv", "venv", "node_modules"}
)
JUNK_SUFFIXES = (".pyc", ".pyo")
UNREADABLE = b"\0(unreadable)"
"""Stands for a file of an attempt's copy that cannot be read: shown as binary."""
PIECE = 1 << 20
"""How much of a large file is read at once."""
log = logging.getLogger("mulligan")


def _junk(relative: str) -> bool:
    parts = relative.split("/")
    return any(p in JUNK_DIRS for p in parts) or relative.endswith(JUNK_SUFFIXES)


def _git(
    directory: Path, *argv: str, timeout: float, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """git run in `directory`, its output captured."""
    command = ["git", "-C", str(directory), *argv]
    return subprocess.run(command, input=stdin, capture_output=True, timeout=timeout)


def is_git_repository(directory: Path) -> bool:
    """Inside a git working tree, and not in a part of it that git ignores."""

    def git(*argv: str) -> int:
        try:
            done = _git(directory, *argv, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return -1
        if b"safe.directory" in done.stderr:  # a repository another user owns
            log.warning(
                "git will not read %s, which another user owns, so its .gitignore is not "
                "read and the attempts' copies hold the whole directory; to have git read "
                "it: git config --global --add safe.directory %s", directory, directory,
            )  # fmt: skip
        return done.returncode

    return git("rev-parse", "--show-prefix") == 0 and git("check-ignore", "-q", ".") == 1


def _git_files(directory: Path) -> list[str]:
    listing = ("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    done = _git(directory, *listing, timeout=120)
    if done.returncode != 0:
        raise UserError(f"{directory}: git ls-files failed: {done.stderr.decode().strip()}")
    found = []
    for listed in {p.rstrip("/") for p in os.fsdecode(done.stdout).split("\0") if p}:
        path = directory / listed
        if path.is_dir() and not path.is_symlink():  # a submodule, or a repository cloned here
            inner = _git_files(path) if (path / ".git").exists() else _walk_files(path)
            found += [f"{listed}/{p}" for p in inner]
        else:
            found.append(listed)
    return sorted(found)


def _undecodable(relative: str) -> bool:
    """A name os.fsdecode kept as surrogates: its bytes are not UTF-8."""
    return any("\ud800" <= c <= "\udfff" for c in relative)


def nameable(relative: str) -> bool:
    """A path a diff can name: printable UTF-8 (no newline to start a line of the diff)."""
    return relative.isprintable() and not _undecodable(relative)


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
        temporary = Path(tempfile.gettempdir()).resolve()
        if temporary != self.directory and temporary.is_relative_to(self.directory):
            self.skip.append(temporary)  # the copies are made there (TMPDIR=$PROJECT/tmp)

    def files(self) -> list[str]:
        listed = _git_files(self.directory) if self.git else _walk_files(self.directory)
        kept = [p for p in listed if not _junk(p) and not self._skipped(p)]
        for relative in kept:
            if not nameable(relative):
                raise UserError(
                    f"{self.directory}: the file name {os.fsencode(relative)!r} is not printable "
                    "UTF-8, which a diff cannot name; rename it, or solve a copy without it"
                )
        return kept

    def make_directories(self, root: Path) -> None:
        """The project's directories that hold no file (a test may need `out/`), in root."""
        found = []
        for parent, dirs, _ in os.walk(self.directory):
            dirs[:] = [d for d in dirs if d not in JUNK_DIRS and not Path(parent, d).is_symlink()]
            found += [Path(parent, d).relative_to(self.directory).as_posix() for d in dirs]
        kept = [d for d in found if not _undecodable(d) and not self._skipped(d)]
        for relative in sorted(set(kept) - self.ignored(kept)):
            (root / relative).mkdir(parents=True, exist_ok=True)

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
            names = "\0".join(rest).encode() + b"\0"
            checking = ("check-ignore", "--no-index", "-z", "--stdin")
            try:
                done = _git(self.directory, *checking, stdin=names, timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                return ignored  # shown in the diff rather than lost
            ignored |= {p for p in done.stdout.decode(errors="replace").split("\0") if p}
        return ignored


def read_tree(root: Path, files: list[str], strict: bool = True) -> Snapshot:
    """The files' contents; an unreadable one is an error (`strict`) or shown as binary."""
    read = {relative: read_entry(root / relative, strict) for relative in files}
    return {relative: entry for relative, entry in read.items() if entry is not None}


def read_entry(path: Path, strict: bool = True, copy_to: Path | None = None) -> Entry | None:
    """What a path holds: a symlink's target, a file's bytes, or a large file's digest, read
    in pieces (`Large`); None for what a diff cannot show (a FIFO, a socket, a file gone).
    With `copy_to`, it is also written there (a large file as it is read, never whole)."""
    try:
        info = path.lstat()
    except FileNotFoundError:  # tracked but deleted in the working tree
        return None
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(path)
        if copy_to is not None:
            copy_to.symlink_to(target)
        return Link(target)
    if not stat.S_ISREG(info.st_mode):
        return None
    try:
        if info.st_size <= MAX_DIFF_BYTES:
            content = path.read_bytes()
            if copy_to is not None:
                copy_to.write_bytes(content)
            return content
        return Large(_copied_digest(path, copy_to))
    except PermissionError as exc:
        if strict:
            raise UserError(f"{path}: cannot read it ({exc.strerror})") from exc
        return UNREADABLE


def _copied_digest(path: Path, copy_to: Path | None) -> str:
    """The digest of a file's bytes, read in pieces, each also written to `copy_to`."""
    digest = hashlib.sha256()
    with open(path, "rb") as source, open(copy_to or os.devnull, "wb") as target:
        while piece := source.read(PIECE):
            digest.update(piece)
            target.write(piece)
    return digest.hexdigest()


def executable(root: Path, snapshot: Snapshot) -> set[str]:
    """The snapshot's files that their owner may run."""
    found = set()
    for relative, entry in snapshot.items():
        with contextlib.suppress(OSError):
            if not isinstance(entry, Link) and (root / relative).lstat().st_mode & stat.S_IXUSR:
                found.add(relative)
    return found


def digests(snapshot: Snapshot) -> dict[str, str]:
    """Each entry's digest: a file's bytes, a link's target."""
    return {relative: _digest(entry) for relative, entry in snapshot.items()}


def _digest(entry: Entry) -> str:
    if isinstance(entry, Large):
        return entry.digest
    return hashlib.sha256(
        entry if isinstance(entry, bytes) else f"link:{entry.target}".encode()
    ).hexdigest()


def _mode(path: Path) -> int:
    """The file's permission bits (executable scripts stay executable), writable by us."""
    try:
        return stat.S_IMODE(path.stat().st_mode) | 0o600
    except OSError:
        return 0o644


# ---------------------------------------------------------------- copies per attempt


@dataclass
class Copy:
    base: Snapshot
    digests: dict[str, str]
    executable: set[str]


class ProjectCopies:
    """A workspace factory for the loop: each attempt gets a fresh copy of the project."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.copies: dict[Path, Copy] = {}
        self.started: dict[int, dict[str, str]] = {}
        """Trial -> the project's `digests` when that attempt's copy was made."""

    @contextlib.contextmanager
    def __call__(self, task: Task) -> Iterator[Path]:
        with marked_directory(COPY) as workspace:
            base: Snapshot = {}
            modes = {}
            for relative in self.project.files():
                source, target = self.project.directory / relative, workspace / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                entry = read_entry(source, copy_to=target)
                if entry is None:
                    continue
                base[relative] = entry
                if not isinstance(entry, Link):
                    modes[relative] = _mode(source)
                    target.chmod(modes[relative])
            self.project.make_directories(workspace)
            executable = {p for p, mode in modes.items() if mode & stat.S_IXUSR}
            self.copies[workspace] = Copy(base, digests(base), executable)
            try:
                yield workspace
            finally:
                del self.copies[workspace]

    def changes(self, workspace: Path, trial: int) -> str:
        """The unified diff from the copy's start to its present state."""
        copy = self.copies[workspace]
        self.started[trial] = copy.digests
        present = read_tree(workspace, _walk_files(workspace), strict=False)
        unnamed = [p for p in present if not nameable(p)]
        if unnamed:
            log.warning(
                "attempt %d made %s, whose names are not printable UTF-8: left out of its diff",
                trial, ", ".join(repr(os.fsencode(p))[1:] for p in unnamed),
            )  # fmt: skip
        new = [p for p in present if p not in copy.base and nameable(p)]
        for left_out in [*unnamed, *self.project.ignored(new)]:
            del present[left_out]
        return unified_diff(copy.base, present, (copy.executable, executable(workspace, present)))

    def changed_since(self, trial: int) -> list[str] | None:
        """The project's paths changed, added or removed since this trial began (None: not
        known here)."""
        if trial not in self.started:
            return None
        then, now = self.started[trial], digests(self.project.snapshot())
        return sorted(p for p in set(then) | set(now) if then.get(p) != now.get(p))


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

    def evaluate(
        self,
        task: Task,
        attempt: Attempt,
        workspace: Path | None = None,
        policy: sandbox.Policy | None = None,
    ) -> Verdict:
        if workspace is not None and workspace in self.copies.copies:
            attempt.changes = self.copies.changes(workspace, attempt.trial)
        verdict = super().evaluate(task, attempt, workspace, policy)
        if self.on_verdict:
            self.on_verdict(attempt, verdict)
        return verdict
