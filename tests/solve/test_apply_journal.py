"""The --apply journal a `solve` finds in DIR when it starts (`DIR/.mulligan-apply.json`) is
not trusted blindly: one that is corrupt, of another shape, or that leads outside DIR or to
a file that is not one of its staged files (a journal forged into a cloned repository, a
disk error) is one clear line, with nothing inside or outside DIR written or removed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mulligan.errors import UserError
from mulligan.solve.journal import (
    JOURNAL,
    STAGED,
    WRITING,
    content_digest,
    finish_interrupted,
)
from tests.helpers.solving import FIX, files_of, one_line_error, scripted, solve
from tests.solve.test_solve import BUGGY, make_project

PAYLOAD = b"written by a forged journal\n"
STAGED_NAME = f".calc.py{STAGED}0badf00d"


def entry(path: Any, staged: Any, old: Any = None, new: Any = None) -> dict[str, Any]:
    return {"path": path, "staged": staged, "old": old, "new": new}


def laid_out(tmp_path: Path) -> tuple[Path, Path]:
    """A project (with a staged-looking file in it and a file beside it) and what is
    outside it: a victim file beside the project and a payload of the right name."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("the user's other file\n")
    (outside / STAGED_NAME).write_bytes(PAYLOAD)
    project = make_project(tmp_path / "outside" / "calc")
    (project / STAGED_NAME).write_bytes(PAYLOAD)
    (project / "link").symlink_to(outside)
    return project, outside


NEW = content_digest(PAYLOAD, link=False)
LEADING_OUT = {
    "a path above DIR": ("committed", [entry("../new.txt", STAGED_NAME, None, NEW)]),
    "an absolute path": ("committed", [entry("{outside}/new.txt", STAGED_NAME, None, NEW)]),
    "a path through a symlink": ("committed", [entry("link/new.txt", STAGED_NAME, None, NEW)]),
    "a deletion through a symlink": (
        "committed",
        [entry("link/victim.txt", None, content_digest(b"the user's other file\n", False))],
    ),
    "a staged file above DIR": ("committed", [entry("new.txt", f"../{STAGED_NAME}", None, NEW)]),
    "undoing a staged file above DIR": ("staging", [entry("x.py", f"../{STAGED_NAME}")]),
    "undoing a staged file through a symlink": ("staging", [entry("x.py", f"link/{STAGED_NAME}")]),
    "undoing a project file as if staged": ("staging", [entry("x.py", "calc.py")]),
    "undoing the victim as if staged": ("staging", [entry("x.py", "link/victim.txt")]),
}


@pytest.mark.parametrize("journal", LEADING_OUT.values(), ids=LEADING_OUT.keys())
def test_a_journal_leading_outside_dir_or_to_a_users_file_writes_and_removes_nothing(
    journal: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    project, outside = laid_out(tmp_path)
    state, entries = journal
    for item in entries:
        item["path"] = item["path"].format(outside=outside)
    (project / JOURNAL).write_text(json.dumps({"state": state, "entries": entries}))
    before = files_of(outside)
    with pytest.raises(UserError, match="cannot be finished"):
        finish_interrupted(project)
    assert files_of(outside) == before


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"state": "committed", "entries": [1]}),
        json.dumps({"state": "committed", "entries": [{"path": "calc.py"}]}),
        json.dumps({"state": "staging", "entries": [{"path": "calc.py"}]}),
        json.dumps({"state": "committed", "entries": [entry(3, None)]}),
        json.dumps({"state": "committed", "entries": [entry("calc.py", None, 7)]}),
        json.dumps({"state": "applied", "entries": []}),
        json.dumps({"state": "committed", "entries": {"calc.py": None}}),
    ],
    ids=["an-entry-not-an-object", "committed-without-staged", "staging-without-staged",
         "a-path-not-text", "a-digest-not-text", "an-unknown-state", "entries-not-a-list"],
)  # fmt: skip
def test_a_journal_of_another_shape_is_one_line_with_dir_untouched(
    text: str, tmp_path: Path
) -> None:
    project, outside = laid_out(tmp_path)
    (project / JOURNAL).write_text(text)
    before = files_of(outside)
    with pytest.raises(UserError, match="cannot be finished"):
        finish_interrupted(project)
    assert files_of(outside) == before


def test_a_journal_that_is_a_directory_is_one_line(tmp_path: Path) -> None:
    project, _ = laid_out(tmp_path)
    (project / JOURNAL).mkdir()
    with pytest.raises(UserError, match=JOURNAL):
        finish_interrupted(project)


def test_solve_in_a_dir_with_a_forged_journal_stops_in_one_line_before_any_model_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project, outside = laid_out(tmp_path)
    forged = {"state": "staging", "entries": [entry("x.py", "link/victim.txt")]}
    (project / JOURNAL).write_text(json.dumps(forged))
    before = files_of(outside)
    code, server = solve(tmp_path, project, scripted([FIX]), "--apply")
    assert code == 2 and server.requests == []
    assert JOURNAL in one_line_error(capsys.readouterr().err)
    assert files_of(outside) == before
    assert (project / "calc.py").read_text() == BUGGY


def test_a_committed_journal_that_deletes_a_symlink_its_new_files_replace_is_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A diff that turns the symlink `lib` into a directory `lib/` names a path through a
    symlink, as a forged journal would: the journal deletes that symlink first, so it is
    finished all the same."""
    from mulligan.solve import journal
    from mulligan.solve.diffs import Link, apply_diff, unified_diff

    root = tmp_path / "project"
    (root / "elsewhere").mkdir(parents=True)
    (root / "lib").symlink_to("elsewhere")
    diff = unified_diff({"lib": Link("elsewhere")}, {"lib/x.py": b"y\n"})
    finish = journal._finish
    monkeypatch.setattr(journal, "_finish", lambda *args: None)  # killed right after the commit
    apply_diff(diff, root)
    monkeypatch.setattr(journal, "_finish", finish)
    assert (root / "lib").is_symlink() and (root / JOURNAL).exists()
    assert finish_interrupted(root) == ("finished", ["lib", "lib/x.py"])
    assert not (root / "lib").is_symlink() and (root / "lib" / "x.py").read_bytes() == b"y\n"
    assert list((root / "elsewhere").iterdir()) == []


def test_what_the_commit_and_the_finish_rely_on_is_synced_before_they_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against a power cut: every directory a file was staged in is synced before the journal
    says committed (else a committed journal could name a staged file the disk lost, and
    only part of the diff could be finished), and every directory made for a new file, up to
    DIR, after it is renamed in (else the disk could lose the new file's directory)."""
    from mulligan.solve import journal
    from mulligan.solve.diffs import apply_diff, unified_diff

    root = tmp_path / "project"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("A = 1\n")
    events: list[tuple[str, Any]] = []
    sync, record = journal._sync_directory, journal._record

    def syncing(directory: Path) -> None:
        events.append(("sync", directory))
        sync(directory)

    def recording(at: Path, state: dict[str, Any]) -> None:
        record(at, state)
        events.append(("record", state["state"]))

    monkeypatch.setattr(journal, "_sync_directory", syncing)
    monkeypatch.setattr(journal, "_record", recording)
    before = {"src/pkg/mod.py": b"A = 1\n"}
    after = {"src/pkg/mod.py": b"A = 2\n", "src/new/deep/x.py": b"B = 1\n"}
    apply_diff(unified_diff(before, after), root)
    commit = events.index(("record", "committed"))
    staged_in = {root / "src" / "pkg", root / "src"}
    assert staged_in <= {where for what, where in events[:commit] if what == "sync"}
    made = {root / "src" / "new" / "deep", root / "src" / "new", root / "src"}
    assert made <= {where for what, where in events[commit:] if what == "sync"}


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_replaced_file_keeps_its_owner_when_mulligan_runs_as_root(tmp_path: Path) -> None:
    """`sudo mulligan solve --apply` in a user's project: the files the fix replaces stay
    the user's (a root-owned calc.py would no longer be theirs to edit)."""
    from mulligan.solve.diffs import apply_diff, unified_diff

    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text("A = 1\n")
    os.chown(root / "calc.py", 4321, 4322)
    apply_diff(unified_diff({"calc.py": b"A = 1\n"}, {"calc.py": b"A = 2\n"}), root)
    info = (root / "calc.py").stat()
    assert (root / "calc.py").read_text() == "A = 2\n"
    assert (info.st_uid, info.st_gid) == (4321, 4322)


def test_an_unfinished_journal_on_a_filesystem_now_read_only_is_one_line(
    tmp_path: Path,
) -> None:
    """A disk remounted read-only after the crash that cut an --apply short: the journal
    cannot be undone (nor finished) there, which is said, naming it, not a traceback."""
    from tests.solve.test_solve_copies import mounted_read_only

    project, _ = laid_out(tmp_path)
    journal = {"state": "staging", "entries": [entry("calc.py", STAGED_NAME)]}
    (project / JOURNAL).write_text(json.dumps(journal))
    (project / WRITING).write_text(json.dumps({**journal, "state": "committed"}))  # half-made
    before = files_of(project)
    with (
        mounted_read_only(project, tmp_path / "mounted") as mounted,
        pytest.raises(UserError, match=JOURNAL),
    ):
        finish_interrupted(mounted)
    assert files_of(project) == before


@pytest.mark.timeout(30)
def test_a_fifo_put_where_an_interrupted_apply_writes_is_a_conflict_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mulligan.solve import journal
    from mulligan.solve.diffs import apply_diff, unified_diff

    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text("A = 1\n")
    finish = journal._finish
    monkeypatch.setattr(journal, "_finish", lambda *args: None)  # killed right after the commit
    apply_diff(unified_diff({"calc.py": b"A = 1\n"}, {"calc.py": b"A = 2\n"}), root)
    monkeypatch.setattr(journal, "_finish", finish)
    (root / "calc.py").unlink()
    os.mkfifo(root / "calc.py")  # the user's, since
    with pytest.raises(UserError, match="calc.py changed since"):
        finish_interrupted(root)
