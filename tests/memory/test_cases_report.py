"""The transfer report with a case-reading arm: cases learned on the training split are
shown to test tasks as worked examples; the report counts how often, keeps them out of the
lessons table, and its trial-1 row counts the tasks that were shown one."""

from __future__ import annotations

from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.memory import HashEmbedding, Memory
from mulligan.studies import demo
from mulligan.testing import FakeOpenAIServer
from tests.studies.test_transfer import TRAIN, bench, run_ids
from tests.studies.test_transfer import tasks as tasks  # noqa: F401  (the fixture)


def test_a_case_arm_is_shown_the_training_cases_and_the_report_counts_them(
    tmp_path: Path,
    tasks: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        argv = bench(
            server, tasks, out, "--learn-on", TRAIN, "--strategies", "react,memory-frozen-cases"
        )
        assert main([*argv, "--min-similarity", "0"]) == 0
    run_id = run_ids(capsys.readouterr().err)[0]
    memory = Memory(out / "memory", HashEmbedding())
    cases = {x.id for x in memory.store.all() if x.kind == "case"}
    assert len(cases) == 2  # units-1 and units-2 passed in the learning phase
    shown = {
        e["task_id"]: memory.log.episode(e["id"]).attempts[0].lesson_ids  # type: ignore[union-attr]
        for e in memory.log.episodes(run_id)
        if e["strategy"] == "memory-frozen-cases"
    }
    # top-1 within the family: the units tasks get one of the units cases, the arithmetic
    # ones none (no arithmetic task was learned on), so they share react's trial 1
    assert {task for task, ids in shown.items() if ids} == {"units-3", "units-4"}
    assert all(len(ids) == 1 and ids[0] in cases for ids in shown.values() if ids)
    report = (out / "report.md").read_text()
    # the same case to both, at each of their three trials (the script cannot use it)
    assert "worked examples in 6 attempts on the test split (1 distinct case(s))" in report
    assert "| react, trial 1 | memory-frozen-cases, trial 1 (shown memory) | 2 |" in report
    for case in memory.store.get(sorted(cases)):
        assert f"| {case.text} |" not in report  # no case in the lessons table
