"""`mulligan view --bundle` killed with SIGKILL in the middle of writing a page (a real
child process, stopped there after half the page's text): the folder holds no part of a
page under a page's name, and the next `--bundle` into it writes the whole bundle, as an
uninterrupted one would, with nothing of the killed one left."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.view.bundle import MARK, WRITING
from tests.helpers.killing import cli_code, killed, stopped_at
from tests.view.made import RUN, make_logged_run

HALF_A_WRITE = """
with open(args[0], "w", encoding="utf-8") as handle:
    handle.write(args[1][: len(args[1]) // 2])
"""
"""Where a write stops: half of the text is in the file."""


def _parts(found: dict[str, bytes]) -> list[str]:
    return [name for name in found if name.startswith(WRITING)]


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes], int]:
    """A memory with a logged run, its bundle written uninterrupted, and how many files
    writing it wrote (each page, the mark)."""
    root = tmp_path_factory.mktemp("logged")
    make_logged_run(root / "memory")
    writes = []
    real = Path.write_text

    def counted(self: Path, *args: object, **kwargs: object) -> int:
        writes.append(self.name)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "write_text", counted)
        assert bundle(root / "memory", root / "reference") == 0
    return root / "memory", files(root / "reference"), len(writes)


def bundle(memory: Path, out: Path) -> int:
    return main(["view", RUN, "--memory", str(memory), "--bundle", str(out)])


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("over", [False, True], ids=["new-folder", "over-an-earlier-bundle"])
def test_a_killed_bundle_leaves_no_part_page_and_the_next_one_is_whole(
    where: str,
    over: bool,
    logged: tuple[Path, dict[str, bytes], int],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    memory, reference, writes = logged
    out = tmp_path / "bundle"
    if over:
        assert bundle(memory, out) == 0
        (out / "episode-from-an-older-run.html").write_text("an earlier bundle's page")
        mark = (out / MARK).read_text()
        (out / MARK).write_text(
            mark.replace('"files": [', '"files": [\n  "episode-from-an-older-run.html",')
        )
    nth = {"first": 1, "middle": writes // 2, "last": writes}[where]
    argv = ["view", RUN, "--memory", str(memory), "--bundle", str(out)]
    ready = tmp_path / f"ready-{uuid.uuid4()}"
    killed(stopped_at("pathlib:Path.write_text", nth, cli_code(argv), ready, first=HALF_A_WRITE))
    left = files(out) if out.exists() else {}
    for name, content in left.items():
        if name == MARK:  # whole: the files written so far, or about to be
            assert set(json.loads(content)["files"]) >= set(left) - {MARK} - set(_parts(left))
        elif not name.startswith(WRITING) and name != "episode-from-an-older-run.html":
            assert name in reference, f"{name}: not a file of the bundle"
            assert content == reference[name], f"{name}: part of a page under its own name"
    capsys.readouterr()
    assert bundle(memory, out) == 0, capsys.readouterr().err
    assert files(out) == reference
