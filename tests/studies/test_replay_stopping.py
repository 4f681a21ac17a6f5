"""`benchmarks/replay_stopping.py` replays retry on a logged run as if the task's own checks had
decided when to stop: exact, as the replay never reads an attempt the run did not draw."""

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

REPLAY = Path(__file__).parents[2] / "benchmarks" / "replay_stopping.py"


def code(body: str) -> str:
    return f"```python\ndef f(x):\n    {body}\n```"


def task(own: bool) -> Task:
    """Twice x; the model's one self-test is wrong (2x + 1). `own`: the task has an example."""
    hidden = PythonTestsCheck(
        tests="assert f(3) == 6", entry_point="f", name="hidden", visibility="hidden"
    )
    example = PythonTestsCheck(tests="assert f(1) == 2", entry_point="f", name="example")
    checks = [example, hidden] if own else [hidden]
    made = Task(id=f"double-{own}", family="code", prompt="Write f(x): twice x.", checks=checks)
    return with_self_tests(made, ["assert f(2) == 5"])


def test_retry_is_replayed_stopping_by_the_tasks_own_checks(tmp_path: Path) -> None:
    """Each task: a right answer the wrong self-test fails, then two wrong ones. The run (every
    visible check deciding) went on to the third on both; stopping by the task's own checks
    submits the first where the task has an example, and on the task with none the self-test
    still decides under "own checks first"."""
    right, wrong = code("return x * 2"), code("return x + 1")
    model = ScriptedModel([right, wrong, wrong, right, wrong, wrong])
    memory = Memory(tmp_path / "mem", HashEmbedding())
    loop = LoopSection(trials=3, own_checks_first=False)
    study = Study(
        tasks=[task(True), task(False)], strategies=["retry"], model_for=lambda s: model,
        memory=memory, config=RunConfig(loop=loop),
    )  # fmt: skip
    memory.log.start_run("r", study.manifest())
    study.run("r")
    model.assert_done()
    outcomes = tmp_path / "outcomes.jsonl"
    lines = [
        {"run": "r", "strategy": "retry", "pass": 1, "task": t, "submitted": [False] * 3,
         "any_passed": [True] * 3, "tokens": [1, 2, 3]}
        for t in ("double-True", "double-False")
    ]  # fmt: skip
    outcomes.write_text("".join(json.dumps(line) + "\n" for line in lines))
    written = tmp_path / "replayed.jsonl"
    args = [sys.executable, str(REPLAY), str(memory.log.path), "r", "--outcomes", str(outcomes)]
    done = subprocess.run(
        [*args, "--write", str(written), "--rule", "own checks first"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    row = next(line for line in done.stdout.splitlines() if line.startswith("| 3 "))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    # as run: both went to the wrong third; own checks: the first of the task with an
    # example, the first of the one without (nothing says try again); own checks first:
    # there the self-test decides, so the third; oracle: both had a right answer
    assert [c.split(" · ")[:2] for c in cells[1:4]] == [
        ["0", "3.00"], ["2", "1.00"], ["1", "2.00"],
    ]  # fmt: skip
    assert cells[4] == "2"
    replayed = {x["task"]: x for x in map(json.loads, written.read_text().splitlines())}
    assert replayed["double-True"]["strategy"] == "retry-own-checks-first"
    assert replayed["double-True"]["submitted"] == [True, True, True]
    assert replayed["double-False"]["submitted"] == [True, False, False]
    assert replayed["double-True"]["tokens"][0] == replayed["double-True"]["tokens"][2] > 0
