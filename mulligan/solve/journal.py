"""Writing a planned change of several files into a directory whole, through a journal, so
that a process killed at any instant (kill -9, a power cut after the journal's last sync)
leaves the directory to be finished or undone, never left with part of it.

"Whole" across several files: POSIX renames one file at a time, so no directory can move
from the old files to the new ones in one instant. The journal (`JOURNAL`, in the
directory) makes one instant the change's: the moment it is rewritten as `committed`.

1. The journal is written listing every change (`staging`), before anything else.
2. Each new or changed file (or symlink) is written whole beside its target under a hidden
   name of its own (`.NAME.mulligan-apply-TOKEN`, in the deepest real directory above the
   target), with its permission bits, and synced. Nothing the user has is touched yet.
3. The journal is rewritten `committed` (atomically: written beside, synced, renamed).
4. Deletions, then the directories new files need, then one rename per file (each file is
   its old or its new self at every instant, never half-written).
5. The journal is removed.

A kill before 3 leaves every file of the directory as it was; `finish_interrupted` (run
first by the next `solve` on the directory) removes the staged files and the journal. A
kill from 3 on leaves the change committed; `finish_interrupted` carries out what is left.
Either way the directory ends holding all of the change or none of it. A file the user
changed between the kill and the run that finishes it is not written over: the journal
and the staged file stay, and the error names both.
A journal that is not one this module wrote (corrupt, of another shape, naming a path
outside the directory or through a symlink, or a "staged" file that is not one) is refused
before anything is done by it.

One process at a time writes or finishes a change in a directory (a lock on it, which a
killed holder drops), so a live journal is never taken for an interrupted one.

A replaced file is a new file with the old one's permission bits (as git writes one), and
its owner and group where mulligan may give them (as root); hard links to it are not kept.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mulligan.errors import UserError

JOURNAL = ".mulligan-apply.json"
"""The journal of a change being written into the directory (only while it is)."""
WRITING = f"{JOURNAL}.writing"
"""The journal's next state, before it is renamed over the journal."""
STAGED = ".mulligan-apply-"
"""Part of every staged file's name, before its token."""


@dataclass(frozen=True)
class Write:
    """One path's change: `content` (None: the path is deleted) as a file or a symlink."""

    path: str
    content: bytes | None
    link: bool = False
    executable: bool | None = None
    """The diff's mode: executable or not; None: the file's bits as they are (a new
    file's: as the umask gives)."""
    old: str | None = None
    """The digest of what the path holds now (`digest`; None: nothing)."""


def digest(path: Path) -> str | None:
    """What a path holds, as a digest: a symlink's target, a file's bytes (or "directory",
    "special"); None: nothing."""
    try:
        info = path.lstat()
    except (FileNotFoundError, NotADirectoryError):  # a parent is a file: nothing here
        return None
    if stat.S_ISLNK(info.st_mode):
        return content_digest(os.readlink(path).encode(errors="surrogateescape"), link=True)
    if stat.S_ISDIR(info.st_mode):
        return "directory"
    if not stat.S_ISREG(info.st_mode):  # a FIFO, a socket: reading one would block
        return "special"
    return content_digest(path.read_bytes(), link=False)


def content_digest(content: bytes, link: bool) -> str:
    """`digest` of a path that holds this content."""
    return ("link:" if link else "") + hashlib.sha256(content).hexdigest()


@contextlib.contextmanager
def _alone(root: Path) -> Iterator[None]:
    """Held while one process writes a change into `root` or finishes one: another `solve`
    there waits, so a live journal is never taken for an interrupted one. The lock goes with
    a killed holder; where the filesystem has none, nothing is held."""
    descriptor = os.open(root, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def apply_whole(root: Path, writes: list[Write]) -> None:
    """Write every change into `root` whole (see the module's docstring). A write the
    system refuses before the commit undoes what was staged and raises a UserError naming
    the path, with nothing applied."""
    with _alone(root):
        if (root / JOURNAL).exists():
            raise UserError(
                f"{root / JOURNAL}: an earlier --apply to {root} is unfinished; nothing applied "
                "(the next `mulligan solve` there finishes or undoes it first)"
            )
        changed = [write.path for write in writes if digest(root / write.path) != write.old]
        if changed:
            raise UserError(
                f"{', '.join(changed)}: changed in {root} since the diff was read; nothing applied"
            )
        token = secrets.token_hex(4)
        entries = [_entry(root, write, token) for write in writes]
        journal = {"state": "staging", "entries": entries}
        try:
            _record(root, journal)
        except OSError as exc:  # before anything is staged: a read-only or full filesystem
            with contextlib.suppress(OSError):
                (root / WRITING).unlink()
            raise UserError(f"{root}: {exc.strerror or exc}; nothing applied") from exc
        for write, entry in zip(writes, entries, strict=True):
            if write.content is None:
                continue
            try:
                _stage(root, write, entry["staged"])
            except OSError as exc:
                _roll_back(root, journal)
                raise UserError(f"{write.path}: {exc.strerror or exc}; nothing applied") from exc
            except BaseException:  # Ctrl-C: undone now, not left for the next solve to find
                _roll_back(root, journal)
                raise
        for directory in {(root / e["staged"]).parent for e in entries if e["staged"]}:
            _sync_directory(directory)  # the staged names, before the journal counts on them
        _record(root, {**journal, "state": "committed"})
        _finish(root, entries)


def _finish(root: Path, entries: list[dict[str, Any]]) -> None:
    try:
        _roll_forward(root, entries)
    except OSError as exc:
        raise UserError(
            f"{root}: {exc.strerror or exc} ({exc.filename}) while applying a committed change; "
            f"the journal {root / JOURNAL} keeps the rest: the next `mulligan solve` in {root} "
            "finishes it"
        ) from exc


def finish_interrupted(root: Path) -> tuple[str, list[str]] | None:
    """Finish or undo a change a killed process left in `root`: ("finished", paths) when it
    was committed, ("undid", paths) when it was not; None when there is none."""
    with _alone(root):
        if os.path.lexists(root / WRITING):  # looked for first: a read-only root refuses unlink
            with contextlib.suppress(OSError):  # left, where it cannot go: the journal decides
                (root / WRITING).unlink()  # a next state never committed
        journal = _read(root)
        if journal is None:
            return None
        entries = journal["entries"]
        paths = [entry["path"] for entry in entries]
        if journal["state"] == "committed":
            _finish(root, entries)
            return "finished", paths
        try:
            _roll_back(root, journal)
        except OSError as exc:  # a disk remounted read-only since, say
            raise UserError(
                f"{root / JOURNAL}: {exc.strerror or exc} ({exc.filename}) while undoing an "
                f"--apply cut short before any of it was written; the next `mulligan solve` "
                f"in {root} undoes it once it can write there"
            ) from exc
        return "undid", paths


def _read(root: Path) -> dict[str, Any] | None:
    """The journal in `root` (None: there is none), checked before anything is done by it:
    a journal that is corrupt, of another shape, or that names a path outside `root`, or a
    staged file that is not one (a journal forged into a cloned repository) is refused."""
    path = root / JOURNAL
    try:
        if not stat.S_ISREG(path.lstat().st_mode):  # a FIFO would block the read
            raise ValueError("not a regular file")
        journal = json.loads(path.read_text(encoding="utf-8"))
        _check_shape(root, journal)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        reason = f"not JSON ({exc})" if isinstance(exc, json.JSONDecodeError) else exc
        raise UserError(
            f"{path}: {reason}, so an earlier --apply cannot be finished; look at the files it "
            "names, then remove it"
        ) from None
    return journal  # type: ignore[no-any-return]


def _check_shape(root: Path, journal: Any) -> None:
    """ValueError unless the journal is one `apply_whole` writes, inside `root`."""
    if not isinstance(journal, dict) or journal.get("state") not in ("staging", "committed"):
        raise ValueError("not a journal of this mulligan (no state staging or committed)")
    entries = journal.get("entries")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError("its entries are not a list of objects")
    deleted = {e.get("path") for e in entries if e.get("staged", "") is None}
    for entry in entries:
        if set(entry) != {"path", "staged", "old", "new"}:
            raise ValueError(f"an entry has the fields {sorted(entry)}")
        if not all(isinstance(value, str | None) for value in entry.values()):
            raise ValueError(f"an entry's fields are not text: {entry}")
        path, staged = entry["path"], entry["staged"]
        for named in [path] + ([staged] if staged is not None else []):
            if not isinstance(named, str) or not _inside(named):
                raise ValueError(f"it names {named!r}, outside {root}")
            linked = first_parent(root, named, Path.is_symlink)
            if linked is not None and (named == staged or linked not in deleted):
                raise ValueError(f"it names {named!r}, through the symlink {linked}")
        if staged is not None and STAGED not in Path(staged).name:
            raise ValueError(f"it names {staged!r} as a staged file, which it is not")


def _inside(relative: str) -> bool:
    parts = Path(relative).parts
    return bool(parts) and not Path(relative).is_absolute() and ".." not in parts


def first_parent(root: Path, relative: str, odd: Callable[[Path], bool]) -> str | None:
    """The first of the path's parents below `root`, from the top, for which `odd` holds."""
    above = reversed(Path(relative).parents[:-1])
    return next((parent.as_posix() for parent in above if odd(root / parent)), None)


def _entry(root: Path, write: Write, token: str) -> dict[str, Any]:
    """The journal's line for one change: the path, where its new content is staged (None:
    deleted), what it held and what it will hold (for checking before it is written)."""
    staged = new = None
    if write.content is not None:
        parent, _, name = write.path.rpartition("/")
        place = _staging_directory(root, parent) / f".{name}{STAGED}{token}"
        staged, new = place.relative_to(root).as_posix(), content_digest(write.content, write.link)
    return {"path": write.path, "staged": staged, "old": write.old, "new": new}


def _staging_directory(root: Path, parent: str) -> Path:
    """The deepest real directory (no symlink, no file) above a path: staged there, a file
    is renamed into place without crossing a filesystem or following a link."""
    here = root
    for part in Path(parent).parts if parent else ():
        step = here / part
        if step.is_symlink() or not step.is_dir():
            break
        here = step
    return here


def _record(root: Path, journal: dict[str, Any]) -> None:
    """The journal's new state, whole: written beside it, synced, renamed over it."""
    writing = root / WRITING
    with open(writing, "w", encoding="utf-8") as handle:
        json.dump(journal, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(writing, root / JOURNAL)
    _sync_directory(root)


def _stage(root: Path, write: Write, staged: str) -> None:
    """The new content beside its target, whole, with its permission bits, synced."""
    path = root / staged
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a stage of this same token cannot exist; a stray one is ours
    assert write.content is not None
    if write.link:
        path.symlink_to(write.content.decode(errors="surrogateescape"))
        return
    target = root / write.path
    existing = target.is_file() and not target.is_symlink()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(write.content)
        handle.flush()
        os.fsync(handle.fileno())
    info = (target if existing else path).stat()
    if existing and (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(OSError):  # as root; as a user, only to a group of theirs
            os.chown(path, info.st_uid, info.st_gid)
    bits = stat.S_IMODE(info.st_mode)
    if write.executable is not None:
        bits = bits | (bits & 0o444) >> 2 if write.executable else bits & ~0o111
    path.chmod(bits)


def _roll_back(root: Path, journal: dict[str, Any]) -> None:
    for entry in journal["entries"]:
        if entry["staged"]:
            with contextlib.suppress(FileNotFoundError):
                (root / entry["staged"]).unlink()
    with contextlib.suppress(FileNotFoundError):
        (root / JOURNAL).unlink()
    _sync_directory(root)


def _roll_forward(root: Path, entries: list[dict[str, Any]]) -> None:
    """Deletions, then renames, each done once (a step done before a kill is seen done);
    a path that holds neither what it held nor what it will hold is left, and named."""
    ordered = sorted(entries, key=lambda entry: entry["staged"] is not None)
    conflicts = [entry for entry in ordered if not _carry_out(root, entry)]
    for directory in _holding(root, [entry["path"] for entry in entries]):
        _sync_directory(directory)  # every removal and rename, and the directories made
    if conflicts:
        names = ", ".join(str(entry["path"]) for entry in conflicts)
        staged = [str(entry["staged"]) for entry in conflicts if entry["staged"]]
        new = f" (the new versions: {', '.join(staged)})" if staged else ""
        raise UserError(
            f"{root}: {names} changed since the --apply that was interrupted began: the rest "
            f"of it is applied, these are left as they are{new}; merge them by hand, then "
            f"remove {root / JOURNAL}"
        )
    _forget(root)


def _holding(root: Path, paths: list[str]) -> list[Path]:
    """Every directory from each path's parent up to `root`, deepest first, once."""
    found = dict.fromkeys(root / parent for path in paths for parent in Path(path).parents)
    return sorted(found, key=lambda directory: -len(directory.parts))


def _carry_out(root: Path, entry: dict[str, Any]) -> bool:
    """One step of a committed change; False when the path was changed by someone else."""
    target = root / entry["path"]
    if first_parent(root, entry["path"], Path.is_symlink):  # a deletion before it was refused
        return False
    now = digest(target)
    if entry["staged"] is None:  # a deletion
        if now is None or now == "directory":  # done (a new directory may stand there now)
            return True
        if now != entry["old"]:
            return False
        target.unlink()
        return True
    staged = root / entry["staged"]
    if not staged.exists() and not staged.is_symlink():
        return now == entry["new"]  # renamed before the kill (else: gone, and changed)
    if now not in (entry["old"], entry["new"]):
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, target)
    return True


def _forget(root: Path) -> None:
    (root / JOURNAL).unlink()
    _sync_directory(root)


def _sync_directory(directory: Path) -> None:
    """A rename or removal in `directory` survives a power cut once this returns."""
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
