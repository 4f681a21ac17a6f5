"""`benchmarks/replay_selection.py` replays the selection rule on a logged select run: the
current rule reproduces the run's own picks, dual agreement alone shows what the rule before
it would have submitted, and `--write` gives outcome lines `compare_runs.py` can pair."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mulligan.evaluator.self_tests import with_self_tests
from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import PythonTestsCheck, Task
from mulligan.settings.run_config import LoopSection, RunConfig
from mulligan.studies.study import Study
from mulligan.testing import ScriptedModel

REPLAY = Path(__file__).parents[2] / "benchmarks" / "replay_selection.py"


def code(body: str) -> str:
    return f"```python\ndef f(x):\n    {body}\n```"


def doubling() -> Task:
    """The task's own example is right; the model's two self-tests are wrong (2x + 1)."""
    checks = [
        PythonTestsCheck(tests="assert f(1) == 2", entry_point="f", name="example"),
        PythonTestsCheck(
            tests="assert f(3) == 6", entry_point="f", name="hidden", visibility="hidden"
        ),
    ]
    task = Task(id="double", family="code", prompt="Write f(x): twice x.", checks=checks)
    return with_self_tests(task, ["assert f(2) == 5", "assert f(3) == 7"])


def test_the_replay_reproduces_the_runs_picks_and_shows_dual_agreement_alone(
    tmp_path: Path,
) -> None:
    """Candidate 1 passes the task's example only; 2 and 3 pass the wrong self-tests only.
    The run (the task's checks first) submits 1, which is right; dual agreement alone would
    have submitted 2 at budgets 2 and 3."""
    replies = [
        json.dumps({"inputs": [[1], [2]]}),
        code("return x * 2"),
        code("return 2 * x + 1"),
        code("return x + x + 1"),
    ]
    model = ScriptedModel(replies)
    memory = Memory(tmp_path / "mem", HashEmbedding())
    study = Study(
        tasks=[doubling()], strategies=["select"], model_for=lambda s: model,
        memory=memory, config=RunConfig(loop=LoopSection(trials=3, probes="always")),
    )  # fmt: skip
    memory.log.start_run("r", study.manifest())
    study.run("r")
    model.assert_done()
    outcomes = tmp_path / "outcomes.jsonl"
    line = {"run": "r", "strategy": "select", "pass": 1, "task": "double"}
    line |= {"submitted": [False] * 3, "any_passed": [True] * 3, "tokens": [10, 20, 30]}
    outcomes.write_text(json.dumps(line) + "\n")
    written = tmp_path / "replayed.jsonl"
    log = str(memory.log.path)
    args = [sys.executable, str(REPLAY), log, "r", "--outcomes", str(outcomes)]
    done = subprocess.run(
        [*args, "--write", str(written)], capture_output=True, text=True, check=True
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 3 ")]
    # budget, the run's, checks first, stopping at a pass too, alone, oracle
    assert rows[0] == "| 3 | 1 | 1 | 1 | 0 | 1 |"
    assert "| 2 | 1 | 1 | 1 | 0 | 1 |" in done.stdout
    replayed = json.loads(written.read_text())
    assert replayed["strategy"] == "select-replayed"
    assert replayed["submitted"] == [True, True, True]
    drawn = [line.split(" | ")[3] for line in done.stdout.splitlines() if line.startswith("| 3 ")]
    tokens = int(drawn[-1].split(" · ")[1].strip(" |").replace(",", ""))
    assert drawn[-1].startswith("3.00 · ") and replayed["tokens"][-1] == tokens > 0


def test_stopping_at_a_pass_is_replayed_on_a_run_that_drew_on(tmp_path: Path) -> None:
    """Logged with `stop_at_pass` off: candidate 1 passes the task's example (and is wrong),
    2 and 3 agree with each other beyond it (and are right). Drawing until decided submits
    2; stopping at a pass would have drawn candidate 1 alone and submitted it."""
    replies = [
        json.dumps({"inputs": [[1], [5]]}),
        code("return x * 2 if x < 3 else 0"),
        code("return x + x"),
        code("return 2 * x"),
    ]
    model = ScriptedModel(replies)
    memory = Memory(tmp_path / "mem", HashEmbedding())
    task = Task(
        id="double", family="code", prompt="Write f(x): twice x.",
        checks=[
            PythonTestsCheck(tests="assert f(1) == 2", entry_point="f", name="example"),
            PythonTestsCheck(
                tests="assert f(3) == 6", entry_point="f", name="hidden", visibility="hidden"
            ),
        ],
    )  # fmt: skip
    config = RunConfig(loop=LoopSection(trials=3, stop_at_pass=False, probes="always"))
    study = Study(tasks=[task], strategies=["select"], model_for=lambda s: model,
                  memory=memory, config=config)  # fmt: skip
    memory.log.start_run("r", study.manifest())
    study.run("r")
    model.assert_done()
    done = subprocess.run(
        [sys.executable, str(REPLAY), str(memory.log.path), "r"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 3 ")]
    assert rows[0] == "| 3 | 1 | 1 | 0 | 1 | 1 |"
    assert rows[1].split(" | ")[2].startswith("3.00 · ")  # until decided
    assert rows[1].split(" | ")[3].startswith("1.00 · ")  # stopping at a pass


def test_write_without_outcomes_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPLAY), str(tmp_path / "none.db"), "r", "--write", "x"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "--outcomes and --write go together" in done.stderr


def test_a_missing_or_broken_log_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "broken.db"
    broken.write_text("not a database")
    for log, said in ((tmp_path / "none.db", "no such file"), (broken, "not an episode log")):
        done = subprocess.run(
            [sys.executable, str(REPLAY), str(log), "r"], capture_output=True, text=True,
            check=False,
        )  # fmt: skip
        assert done.returncode == 2 and f"{log}: {said}" in done.stderr
