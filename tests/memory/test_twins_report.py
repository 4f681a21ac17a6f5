"""The transfer report sets the real memory against each faithfulness twin (same items, no
twin), task by task, and counts a lesson's uses on the test split by the real arms only; the
playbook table shows each lesson's verification evidence."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.studies import demo
from mulligan.testing import FakeOpenAIServer
from tests.studies.test_transfer import TRAIN, bench, run_ids
from tests.studies.test_transfer import tasks as tasks  # noqa: F401  (the fixture)


def test_the_report_shows_the_real_memory_against_its_twin(
    tmp_path: Path,
    tasks: Path,
    capsys: pytest.CaptureFixture[str],  # noqa: F811
) -> None:
    out = tmp_path / "out"
    arms = "react,memory-frozen,memory-frozen-corrupted"
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        argv = bench(server, tasks, out, "--learn-on", TRAIN, "--strategies", arms)
        assert main(argv) == 0
    assert run_ids(capsys.readouterr().err)
    report = (out / "report.md").read_text()
    assert "faithfulness twins" in report
    # the scripted model only looks for "multiply the km by 1000", which the negated lesson
    # ("Do not multiply the km by 1000.") still holds: the twin does as well, as it would
    # for an actor that does not read what it is shown
    assert "| memory-frozen | memory-frozen-corrupted | 4 | 4 | 0 | 0 | 0 | 1.000 |" in report
    shown = "| memory-frozen, trial 1 (shown) | memory-frozen-corrupted, trial 1 (shown) | 2 | 2 |"
    assert shown in report
    # uses on the test split: the real arm's two, not the twin's; then the verified pair
    text = re.escape(demo.UNITS_LESSON)
    assert re.search(rf"\| {text} \| units-1 \| 2 \| 2 \| 0 \| 1 \| 1 \| 0 \| validated \|", report)
