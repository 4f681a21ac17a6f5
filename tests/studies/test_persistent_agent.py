"""`benchmarks/persistent_agent.py --smoke`: the persistent agent's study runs end to end on
the package's fake endpoint, session by session in new processes on one memory, and its
numbers are the memory's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mulligan.memory import HashEmbedding, Memory

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "persistent_agent.py"


def test_the_smoke_study_learns_in_one_session_and_starts_the_next_with_it(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    out = tmp_path / "study"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads((out / "persistent.json").read_text())
    assert [r["session"] for r in rows] == [1, 2, 3]
    first, *later = rows
    assert first["memory"]["first"] == 0  # a candidate never reaches a first attempt
    assert first["lessons"]["written"] == 1 and first["lessons"]["validated"] == 1
    assert first["lessons"]["pairs"] >= 2
    for row in later:  # validated in session 1: from the first attempt on, in a new process
        assert row["memory"]["first"] == row["memory"]["tasks"] == row["memory"]["solved"]
        assert row["baseline"]["solved"] == 0 and row["only_memory"] == row["memory"]["tasks"]
        assert row["memory"]["tokens"] < row["baseline"]["tokens"]
    memory = Memory(out / "memory", HashEmbedding())
    (lesson,) = [x for x in memory.store.all() if x.kind == "failure"]
    assert lesson.validity.status == "validated"
    assert lesson.validity.evidence.pairs == first["lessons"]["pairs"]
    assert "| 3 | 4 |" in (out / "persistent.md").read_text()
    assert "by chance" in done.stdout
