"""`solve` below the command line: a copy of the project per attempt, and what each changed.

Each attempt works in a fresh copy of the user's directory that mulligan makes (so the box
may write there); the directory itself is only read (`diffs.apply_diff` alone writes it).
A git repository is copied as its working tree shows it, minus what `.gitignore` ignores
(repositories inside it, submodules or clones, as theirs show them);
any other directory whole. Caches and virtual environments (JUNK) are never copied.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mulligan import sandbox
from mulligan.errors import UserError
from mulligan.evaluator import Evaluator
from mulligan.evaluator.checks import run_command
from mulligan.llm.base import ChatModel
from mulligan.schema import Attempt, CommandCheck, Task, Verdict
from mulligan.solve.diffs import Link, Snapshot, unified_diff
from mulligan.text_cut import last_lines

JUNK_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
    | {".tox", ".nox", ".venv", "venv", "node_modules"}
)
JUNK_SUFFIXES = (".pyc", ".pyo")
UNREADABLE = b"\0(unreadable)"
"""Stands for a file of an attempt's copy that cannot be read: shown as binary."""


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
            return _git(directory, *argv, timeout=30).returncode
        except (OSError, subprocess.TimeoutExpired):
            return -1

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
    try:
        relative.encode()
    except UnicodeEncodeError:
        return True
    return False


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
        kept = [p for p in listed if not _junk(p) and not self._skipped(p)]
        for relative in kept:
            if not relative.isprintable() or _undecodable(relative):
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


def executable(root: Path, snapshot: Snapshot) -> set[str]:
    """The snapshot's files that their owner may run."""
    found = set()
    for relative, entry in snapshot.items():
        with contextlib.suppress(OSError):
            if isinstance(entry, bytes) and (root / relative).lstat().st_mode & stat.S_IXUSR:
                found.add(relative)
    return found


def digests(snapshot: Snapshot) -> dict[str, str]:
    """Each entry's digest: a file's bytes, a link's target."""
    return {
        relative: hashlib.sha256(
            entry if isinstance(entry, bytes) else f"link:{entry.target}".encode()
        ).hexdigest()
        for relative, entry in snapshot.items()
    }


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
        base = self.project.snapshot()
        modes = {
            p: _mode(self.project.directory / p) for p, e in base.items() if isinstance(e, bytes)
        }
        with sandbox.ScratchWorkspace({}) as workspace:
            assert workspace is not None
            write_tree(workspace, base, modes)
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
        new = [p for p in present if p not in copy.base]
        for ignored in self.project.ignored(new):
            del present[ignored]
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


# ---------------------------------------------------------------- the preflight


@dataclass
class CheckRun:
    """One check run once on the untouched project, before any attempt."""

    check: CommandCheck
    run: sandbox.RunResult

    @property
    def output(self) -> str:
        """As an attempt's verdict would show it: the command, then what it printed."""
        return f"$ {self.check.command}\n{self.run.describe()}"


def preflight(copies: ProjectCopies, task: Task, policy: sandbox.Policy) -> list[CheckRun]:
    """Every command check once, in order, in one copy of the project as it is now, under
    the policy the attempts' checks run under."""
    with copies(task) as workspace:
        return [
            CheckRun(check, run_command(check, workspace, task.network, policy))
            for check in task.checks
            if isinstance(check, CommandCheck)
        ]


def cannot_run(done: CheckRun, project: Path) -> str | None:
    """What stopped the check from running at all, and the fix; None if it ran (pass or fail).

    Only what no change to the project can mend counts: the shell could not start the command
    (exit 126 or 127) or could not read it, `python -m X` has no X, pytest ran no test (a
    model could only write tests to pass), or the check ran out of time untouched."""
    run, command = done.run, done.check.command
    said = " ".join(last_lines(run.stderr, 1)).strip()
    if run.timed_out:
        return (
            f"timed out after {run.seconds:.0f}s on the untouched project; raise --check-timeout "
            f"(now {done.check.timeout:g}s) or give a faster check"
        )
    if run.exit_code in (126, 127):
        program = _program(command)
        return f"{said or program} (exit {run.exit_code}); {_not_started(program, project)}"
    if run.exit_code == 2 and not _shell_reads(command):
        return f"{said} (exit 2); the shell cannot read the command: fix its quoting or syntax"
    if re.search(r"(?:^|[\s/])(?:pytest|py\.test)(?:\s|$)", command) and run.exit_code in (4, 5):
        return _pytest_ran_nothing(run, said)
    module = re.search(r"(?:^|\s)-m\s+([\w.]+)", command)
    if module and run.exit_code and f"No module named {module.group(1)}" in said:
        return (
            f"{said} (exit {run.exit_code}); install {module.group(1)} for that python, "
            "or name a python that has it"
        )
    return None


def _pytest_ran_nothing(run: sandbox.RunResult, said: str) -> str:
    """pytest's usage error (exit 4: no such test path, an unknown option) or no test run (5)."""
    if run.exit_code == 4:
        return f"{said} (exit 4); pytest could not start: name tests that exist, options it knows"
    summary = " ".join(last_lines(run.stdout, 1)).strip()
    return f"{summary}: no tests ran (exit 5); name the tests to run (a file or folder of them)"


def _shell_reads(command: str) -> bool:
    """Whether /bin/sh, which runs every check, can parse the command (`-n`: read, not run)."""
    try:
        done = subprocess.run(["/bin/sh", "-n", "-c", command], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return True  # not known: the check's own output says what it says
    return done.returncode == 0


def _not_started(program: str, project: Path) -> str:
    """Why the box's shell could not start `program`, as far as can be told from outside."""
    if "/" in program and not program.startswith("/"):  # relative to the project's root
        path = project / program
        if not path.is_file():
            return f"{program} is not in the project: give the right path"
        return f"{program} is not executable: chmod +x it, or run it as `sh {program}`"
    found = program if program.startswith("/") else shutil.which(program)
    if not found or not Path(found).exists():
        return f"{program} is not installed or not on the PATH: install it or give its full path"
    return (
        f"outside the box it is {found}, which the box's user cannot reach (a directory only "
        "you can read, such as /root, hides it): name a program it can reach, "
        "e.g. /usr/bin/python3, or make that directory readable"
    )


def _program(command: str) -> str:
    """The command's program: its first word that is not a VAR=value assignment."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return next((w for w in words if not re.match(r"^\w+=", w)), command)
