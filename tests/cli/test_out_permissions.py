"""An output directory the user cannot write in is refused before any work, in one line
naming it; nothing is written there."""

from __future__ import annotations

from pathlib import Path

import pytest

from mulligan.memory.log import EpisodeLog
from mulligan.schema import Verdict
from tests.cli.test_hostile_inputs import cli, refused
from tests.helpers.logged_runs import log_run
from tests.helpers.read_only import read_only


@pytest.mark.parametrize("command", ["report", "bench"])
def test_an_out_directory_without_write_permission_is_refused_in_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = EpisodeLog(tmp_path / "mem" / "episodes.db")
    log_run(
        log, "done", {"strategies": ["react"]}, {"react": {"t": [Verdict(passed=True, score=1)]}}
    )
    argv = {
        "report": ["report", "done"],
        "bench": ["bench", "examples", "--base-url", "http://127.0.0.1:9/v1"],
    }
    (tmp_path / "out").mkdir()
    with read_only(tmp_path / "out") as out:
        result = cli([*argv[command], "--memory", str(tmp_path / "mem"), "--out", str(out)], capsys)
        refused(result, f"--out {out}", "permission")
    assert not any(out.iterdir())
