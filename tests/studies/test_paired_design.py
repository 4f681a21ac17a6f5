"""The paired study design (a shared trial 1 every strategy continues from) and its paired
statistics, checked against a hand computation."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.memory import HashEmbedding, Memory
from mulligan.report.paired import (
    bootstrap_difference,
    mcnemar_exact,
    pair_table,
    tokens_per_extra_success,
)
from mulligan.report.report import write_report
from mulligan.schema import (
    ExactMatchCheck,
    Task,
)
from mulligan.settings.run_config import LoopSection, RunConfig
from mulligan.studies.study import Study
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel
from tests.studies.test_paper import (
    is_reflection,
    pinned,
)

# ---------------------------------------------------------------- 3. the paired design


def study_model() -> ScriptedModel:
    """Right at once on `easy`, never right on `hard`."""

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        if is_reflection(messages):
            return json.dumps({"diagnosis": "Say yes, not maybe.", "lesson": ""})
        return "yes" if "easy" in pinned(messages) else "maybe"

    return ScriptedModel(policy=policy)


def study_tasks() -> list[Task]:
    return [
        Task(id=name, family="f", prompt=f"This one is {name}: say yes.",
             checks=[ExactMatchCheck(answer="yes" if name == "easy" else "never")])
        for name in ("easy", "hard")
    ]  # fmt: skip


@pytest.mark.parametrize(("design", "calls"), [("paired", 5), ("independent", 9)])
def test_the_shared_trial_1_is_made_once_and_every_strategy_continues_from_it(
    tmp_path: Path, design: str, calls: int
) -> None:
    model = study_model()
    memory = Memory(tmp_path / "mem", HashEmbedding())
    study = Study(
        tasks=study_tasks(), strategies=["react", "retry", "reflexion"],
        model_for=lambda strategy: model, memory=memory, config=RunConfig(loop=LoopSection(trials=2)), design=design,
    )  # fmt: skip
    study.memory.log.start_run("r1", study.manifest())
    study.run("r1")
    # paired: react 2 trial-1 calls; retry 1 (hard, trial 2); reflexion 1 reflection + 1 trial;
    # independent: retry and reflexion each make their own trial 1 on both tasks (2 + 2 more)
    assert len(model.calls) == calls
    episodes = {e["strategy"]: memory.log.episode(e["id"]) for e in memory.log.episodes()
                if e["task_id"] == "hard"}  # fmt: skip
    # the same attempt; only what each strategy spent on it afterwards (a reflection) differs
    firsts = {
        strategy: ep.attempts[0].model_dump(exclude={"usage", "usage_by_role"})
        for strategy, ep in episodes.items()
        if ep
    }
    actor = {s: ep.attempts[0].usage_by_role["actor"] for s, ep in episodes.items() if ep}
    if design == "paired":
        assert firsts["react"] == firsts["retry"] == firsts["reflexion"]
        assert actor["react"] == actor["retry"] == actor["reflexion"]
    assert [len(ep.attempts) for ep in episodes.values() if ep] == [1, 2, 2]
    manifest = json.loads(memory.log.run("r1")["manifest"])  # type: ignore[index]
    assert manifest["design"] == design and manifest["config"]["loop"]["carry"] == "full"
    assert manifest["first_attempt_from"] == ("react" if design == "paired" else None)


@pytest.mark.parametrize(("design", "requests"), [("paired", 2), ("independent", 3)])
def test_bench_takes_the_design_flag(tmp_path: Path, design: str, requests: int) -> None:
    (tmp_path / "t.yaml").write_text(
        "- id: hard\n  prompt: Say yes.\n  checks: [{type: exact_match, answer: never}]\n"
    )
    out = tmp_path / design
    with FakeOpenAIServer(policy=lambda body: FakeReply(content="maybe")) as server:
        argv = ["bench", str(tmp_path / "t.yaml"), "--strategies", "react,retry", "--trials", "2",
                "--design", design, "--base-url", server.base_url, "--out", str(out),
                "--embedding", "hash"]  # fmt: skip
        assert main(argv) == 0
        assert len(server.requests) == requests  # paired: retry's trial 1 is react's
    run = Memory(out / "memory", HashEmbedding()).log.runs()[0]
    assert json.loads(run["manifest"])["design"] == design


def test_reflexion_memory_shown_nothing_shares_the_first_attempt(tmp_path: Path) -> None:
    """An empty memory passes nothing through the gate: its trial 1 is react's (a memory that
    knows nothing costs nothing); tests/memory/test_gate.py has one that shows something."""
    model = study_model()
    memory = Memory(tmp_path / "mem", HashEmbedding())
    study = Study(
        tasks=study_tasks()[:1], strategies=["react", "reflexion-memory"],
        model_for=lambda strategy: model, memory=memory, config=RunConfig(loop=LoopSection(trials=2)),
    )  # fmt: skip
    study.memory.log.start_run("r2", study.manifest())
    study.run("r2")
    assert len(model.calls) == 1  # react's trial 1, shared


# ---------------------------------------------------------------- 4. paired statistics


def exact_bootstrap_quantiles(differences: list[int], level: float) -> tuple[float, float]:
    """The bootstrap distribution of the mean difference, enumerated exactly (by hand)."""
    n = len(differences)
    values = {d: differences.count(d) / n for d in set(differences)}
    weights: dict[int, float] = {}
    for counts in itertools.product(range(n + 1), repeat=len(values)):
        if sum(counts) != n:
            continue
        probability = math.factorial(n)
        total = 0
        for (value, share), k in zip(values.items(), counts, strict=True):
            probability *= share**k / math.factorial(k)
            total += value * k
        weights[total] = weights.get(total, 0.0) + probability
    cumulative, low, high = 0.0, None, None
    for total in sorted(weights):
        cumulative += weights[total]
        if low is None and cumulative > (1 - level) / 2:
            low = total / n
        if high is None and cumulative >= 1 - (1 - level) / 2:
            high = total / n
    assert low is not None and high is not None
    return low, high


def test_paired_statistics_match_a_hand_computation() -> None:
    # 10 tasks: both solved 3, only A 1, only B 4, neither 2
    a = (
        dict.fromkeys("abc", True)
        | {"d": True}
        | dict.fromkeys("efgh", False)
        | {"i": False, "j": False}
    )
    b = dict.fromkeys("abc", True) | {"d": False} | dict.fromkeys("efgh", True) | {"i": False, "j": False}  # fmt: skip
    table = pair_table(a, b)
    assert (table.both, table.only_a, table.only_b, table.neither, table.n) == (3, 1, 4, 2, 10)
    # McNemar exact: 5 discordant, 1 favours A: p = 2 * (C(5,0) + C(5,1)) / 2^5 = 12/32
    assert mcnemar_exact(1, 4) == pytest.approx(0.375)
    assert mcnemar_exact(0, 7) == pytest.approx(2 / 128)
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0
    # bootstrap: differences +1 x4, -1 x1, 0 x5; mean +0.3
    xs, ys = list(a.values()), list(b.values())
    low, high = bootstrap_difference(xs, ys, seed=7, resamples=4000)
    exact_low, exact_high = exact_bootstrap_quantiles([int(y) - int(x) for x, y in zip(xs, ys, strict=True)], 0.95)  # fmt: skip
    assert (exact_low, exact_high) == (-0.1, 0.7)
    assert (low, high) == pytest.approx((exact_low, exact_high))
    assert bootstrap_difference(xs, ys, seed=7) == bootstrap_difference(xs, ys, seed=7)
    assert bootstrap_difference([True, False], [True, False]) == (0.0, 0.0)
    # B spent 600 tokens more for 3 more successes
    assert tokens_per_extra_success(1000, 1600, 4, 7) == 200
    assert tokens_per_extra_success(1000, 1600, 4, 4) is None


def test_the_report_shows_the_paired_table_and_trial_1_with_and_without_memory(
    tmp_path: Path,
) -> None:
    model = study_model()
    memory = Memory(tmp_path / "mem", HashEmbedding())
    study = Study(
        tasks=study_tasks(), strategies=["react", "reflexion", "reflexion-memory"],
        model_for=lambda strategy: model, memory=memory, config=RunConfig(loop=LoopSection(trials=2)),
    )  # fmt: skip
    study.memory.log.start_run("r3", study.manifest())
    study.run("r3")
    write_report(memory.log, "r3", tmp_path / "out")
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| react | reflexion | 2 | 1 | 0 | 0 | 1 | 1.000 | +0 pts [+0, +0] | - |" in report
    # the memory showed nothing: no trial-1 row (its trial 1 is react's, equal by construction)
    assert "| react, trial 1 |" not in report


def test_bench_rejects_a_similarity_floor_out_of_range(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mulligan.cli", "bench", "examples", "--min-similarity", "2",
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--min-similarity 2.0: must be a number at least -1 and at most 1" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
