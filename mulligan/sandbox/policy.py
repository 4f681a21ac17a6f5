"""What a box hides and what of the user's home it may reach: one `Policy` per run.

A `Policy` is passed to `run_python`, `run_shell` and `run_tests`; it says which host paths
are covered (datasets with answers, mulligan's own memory, config files with keys) and
whether the user's toolchain (what `PATH` finds under the home: a venv, pyenv, conda,
`~/.local/bin`) is bound read-only into the box's own empty home.

mulligan's own runs pass theirs: a command builds it from the suite's answer files and the
settings files it read (`Suite.hidden`, `RunConfig.policy`), and the loop adds its memory's
directory. `hide()` is the older, process-wide way (a shared policy that every box also
applies), kept for code that calls it; nothing in mulligan does.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

TEMP_DIRS = ("/tmp", "/var/tmp")
"""Replaced in every box by fresh empty ones: what the box needs from them is bound back."""
PREFIX_DIRS = ("bin", "shims", "condabin")
"""A PATH entry so named, in a Python prefix (a venv, conda, pyenv), brings the prefix."""


@dataclass(frozen=True)
class Policy:
    hidden: frozenset[str] = field(default_factory=frozenset)
    """Resolved host paths covered in the box (a directory by an empty one, a file by nothing)."""
    toolchain: bool = True
    """Bind what `PATH` finds under the user's home, read-only, into the box's own home."""

    def hiding(self, *paths: str | Path) -> Policy:
        """This policy with more paths covered."""
        more = {str(Path(p).expanduser().resolve()) for p in paths}
        return Policy(self.hidden | more, self.toolchain)

    def merged(self, other: Policy) -> Policy:
        return Policy(self.hidden | other.hidden, self.toolchain and other.toolchain)


_shared = Policy()
_shared_lock = threading.Lock()


def hide(path: str | Path) -> None:
    """Cover a path in every later box of this process (prefer passing a `Policy`)."""
    global _shared
    with _shared_lock:
        _shared = _shared.hiding(path)


def shared_policy() -> Policy:
    return _shared


def clear_shared() -> None:
    """Forget what `hide()` registered (for tests)."""
    global _shared
    with _shared_lock:
        _shared = Policy()


def effective(policy: Policy | None) -> Policy:
    """The policy a run applies: the one passed, plus whatever `hide()` registered."""
    return _shared if policy is None else policy.merged(_shared)


# ---------------------------------------------------------------- the user's toolchain


def home() -> Path | None:
    """The home the box gets an empty one of its own in place of, if any."""
    try:
        path = Path.home().resolve()
    except (KeyError, RuntimeError):
        return None
    if str(path) in ("/", *TEMP_DIRS) or not path.is_dir():
        return None
    return path


@dataclass(frozen=True)
class Reach:
    """How the box reaches the user's toolchain without the rest of the home."""

    covers: tuple[str, ...] = ()
    """Directories replaced by fresh empty ones: the home, and any other directory the
    run's user could not pass (mode 700, like /root) on the way to the toolchain."""
    binds: tuple[str, ...] = ()
    """Bound read-only into them."""


def toolchain(home_dir: Path | None) -> Reach:
    """What the box needs to run what the user's PATH finds, and mulligan's own python."""
    interpreter = Path(sys.executable)
    found = _toolchain(os.environ.get("PATH", ""), str(home_dir or ""), str(interpreter.parent))
    return Reach(
        tuple(sorted({*([str(home_dir)] if home_dir else []), *found.covers})), found.binds
    )


@functools.cache
def _toolchain(path_env: str, home_dir: str, interpreter_dir: str) -> Reach:
    wanted: list[Path] = []
    covers: set[Path] = set()
    queue = [Path(entry) for entry in path_env.split(os.pathsep) if entry]
    queue.append(Path(interpreter_dir))
    seen: set[Path] = set()
    while queue:
        entry = queue.pop(0)
        if entry in seen or not entry.is_absolute():
            continue
        seen.add(entry)
        for place in {entry, entry.resolve()}:
            top = _covering(place, Path(home_dir) if home_dir else None)
            if top is None or place == top or not place.is_dir():
                continue
            covers.add(top)
            for prefix in _prefix_of(place, top):
                if prefix not in wanted:
                    wanted.append(prefix)
                    queue += _leads_from(prefix)
    wanted = [p for p in wanted if p.is_dir()]
    outermost = [p for p in wanted if not any(p != q and p.is_relative_to(q) for q in wanted)]
    kept = [c for c in covers if not any(c != o and c.is_relative_to(o) for o in covers)]
    return Reach(tuple(str(c) for c in sorted(kept)), tuple(str(p) for p in sorted(outermost)))


def _covering(place: Path, home_dir: Path | None) -> Path | None:
    """The directory the box replaces on the way to `place`: the home, the outermost
    directory that others may not pass, or a temp directory; None when the box sees `place`
    as the host does."""
    blocker = None
    for parent in reversed(place.parents):
        try:
            if parent != Path("/") and not parent.stat().st_mode & stat.S_IXOTH:
                blocker = parent
                break
        except OSError:
            break
    if home_dir is not None and place.is_relative_to(home_dir):
        return blocker if blocker is not None and home_dir.is_relative_to(blocker) else home_dir
    if blocker is None:  # a venv in /tmp: the box's fresh /tmp would take it away
        blocker = next((Path(t) for t in TEMP_DIRS if place.is_relative_to(t)), None)
    return blocker


def _prefix_of(directory: Path, top: Path) -> list[Path]:
    """The directories to bind for one PATH entry under the home."""
    if directory.parent == top / ".local" and directory.name == "bin":
        return [directory, top / ".local" / "lib"]  # pip --user: its scripts and its packages
    prefix = directory.parent
    if directory.name in PREFIX_DIRS and prefix != top and _python_prefix(prefix):
        return [prefix]
    return [directory]


def _python_prefix(prefix: Path) -> bool:
    """A venv, a conda install or environment, a pyenv root, or an installed Python."""
    return (
        (prefix / "pyvenv.cfg").is_file()
        or (prefix / "conda-meta").is_dir()
        or (prefix / "versions").is_dir()
        and (prefix / "shims").is_dir()
        or any((prefix / "lib").glob("python3*"))
    )


def _leads_from(prefix: Path) -> list[Path]:
    """Directories a prefix points at: a venv's base interpreter, symlinked executables."""
    leads: list[Path] = []
    config = prefix / "pyvenv.cfg"
    if config.is_file():
        for line in config.read_text(errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                leads.append(Path(value.strip()))
    for bin_dir in (prefix / "bin", prefix):
        try:
            entries = list(os.scandir(bin_dir))
        except OSError:
            continue
        for item in entries[:500]:
            if item.is_symlink():
                leads.append(Path(os.path.realpath(item.path)).parent)
    return leads


def out_of_reach(home_dir: Path | None) -> list[str]:
    """Without namespaces, as root: the directories holding the toolchain that the run's
    user cannot pass (no mount can bind it past them)."""
    reach = toolchain(home_dir)
    return [
        cover
        for cover in reach.covers
        if any(Path(b).is_relative_to(cover) for b in reach.binds)
        and not all(p.stat().st_mode & stat.S_IXOTH for p in [Path(cover), *Path(cover).parents])
    ]
