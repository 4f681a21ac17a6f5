"""`mulligan memory verify TASKS`: every candidate in the memory is paired, with it and
without it, on the given tasks it is retrieved for, against a real endpoint (here the
package's fake one); the evidence is printed and kept, and `memory show` says it."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.runs.build import build_loop
from mulligan.sandbox.processes import this_process
from mulligan.studies.verify import verify as verify_batch
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.helpers.pause_points import killed_at
from tests.memory.helpers import RIGHT, fresh, one_trial, plant, units_tasks, working_model

TASKS = "\n".join(
    f"- id: units-{n}\n  family: units\n  prompt: 'A path is {n} km long. How long is it in "
    f"metres?'\n  checks: [{{type: exact_match, answer: '{n * 1000}'}}]"
    for n in (1, 2)
)


def metres_when_told(body: dict[str, Any]) -> FakeReply:
    text = json.dumps(body["messages"])
    km = int(text.split("A path is ")[1].split(" km")[0])
    return FakeReply(content=str(km * 1000) if RIGHT in text else str(km))


def verify(tmp_path: Path, *flags: str) -> tuple[Path, int]:
    """`memory verify` of the two units tasks on a memory holding one candidate, "rule":
    the memory, and how many requests reached the endpoint."""
    mem = tmp_path / "mem"
    plant(Memory(mem, HashEmbedding()), "rule", RIGHT)
    tasks = tmp_path / "units.yaml"
    tasks.write_text(TASKS)
    where = ["--memory", str(mem), "--embedding", "hash"]
    with FakeOpenAIServer(policy=metres_when_told) as server:
        argv = ["memory", "verify", str(tasks), *where, "--base-url", server.base_url]
        assert main([*argv, *flags]) == 0
        return mem, len(server.requests)


def test_memory_verify_pairs_each_candidate_and_keeps_the_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mem, requests = verify(tmp_path, "--min-similarity", "0", "--verify-pairs", "2")
    assert requests == 4  # two tasks, with it and without
    out = capsys.readouterr().out
    assert "rule  validated  pairs 2, helped 2, hurt 0 (on units-1, units-2)" in out
    assert "paired on 2 task(s) that passed 0% of the time without a lesson" in out
    assert main(["memory", "show", "rule", "--memory", str(mem)]) == 0
    assert "verified on 2 pairs: helped 2, hurt 0 (on units-1, units-2)" in capsys.readouterr().out


def test_a_lesson_retrieved_for_none_of_the_tasks_is_left_as_it_was_and_no_chance_is_claimed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, requests = verify(tmp_path, "--min-similarity", "0.99")  # nothing is that similar
    assert requests == 0
    out = capsys.readouterr().out
    assert "rule  candidate  pairs 0, helped 0, hurt 0 (retrieved for none of these tasks)" in out
    assert "by chance" not in out and "told anything" not in out


@pytest.mark.parametrize("pairs_counted", [1, 2])
def test_a_verification_killed_and_resumed_counts_each_pair_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pairs_counted: int
) -> None:
    """Killed (SIGKILL) once the first pair, or both (its status not yet settled), were
    counted; resumed with its run id, it ends with the evidence of an uninterrupted one."""
    mem = tmp_path / "mem"
    plant(Memory(mem, HashEmbedding()), "rule", RIGHT)
    tasks = tmp_path / "units.yaml"
    tasks.write_text(TASKS)
    with FakeOpenAIServer(policy=metres_when_told) as server:
        argv = ["memory", "verify", str(tasks), "--memory", str(mem), "--embedding", "hash",
                "--base-url", server.base_url, "--min-similarity", "0", "--verify-pairs", "2"]  # fmt: skip
        run_id = killed_at("verified", pairs_counted, argv, tmp_path / "reached")
        assert main([*argv, "--resume", run_id]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "rule  validated  pairs 2, helped 2, hurt 0 (on units-1, units-2)" in out
    events = [e["event"] for e in Memory(mem, HashEmbedding()).log.lesson_events("rule")]
    assert events == ["created", "helped", "helped", "verified", "verified", "status:validated"]


def test_the_chance_line_of_memory_show_counts_only_the_pairs_made_while_working(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lesson paired twice while working and three times by a batch verification: `memory
    show`'s chance line, which names the pass rate of the attempts it was withheld from while
    working, is for the 2 pairs made so, not all 5 of its evidence."""
    memory = fresh(tmp_path)
    plant(memory, "rule", RIGHT)
    model = working_model()  # never right: every pair the same, the lesson stays a candidate
    settings = LoopSettings(strategy="reflexion-memory", trials=3, min_similarity=0.0)
    loop = build_loop(model, settings, memory=memory)
    for task in units_tasks(2):  # trials 2 and 3 of each: two pairs while working
        loop.run_episode(task)
    verify_batch(memory, memory.lessons(["rule"]), units_tasks(3), one_trial(model, memory),
                 "batch", k=3, min_similarity=0.0, pairs=3)  # fmt: skip
    v = memory.lessons(["rule"])[0].validity
    assert (v.status, v.evidence.pairs) == ("candidate", 5)
    assert len({a.pair for a in memory.log.assignments_of_lesson("rule") if a.pair}) == 2
    assert main(["memory", "show", "rule", "--memory", str(tmp_path / "mem")]) == 0
    out = capsys.readouterr().out
    assert "verified on 5 pairs" in out
    assert "validated by its pair 2 " in out


def test_memory_verify_removes_what_a_killed_mulligan_left_in_tmpdir_as_a_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its attempts work in marked directories too: at its start it removes those whose
    process has ended, as run, bench and solve do, and keeps one whose process runs."""
    code = "import json; from mulligan.sandbox.processes import this_process as p; print(json.dumps(p()))"
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    temp = Path(tempfile.gettempdir())
    for name, owner in (
        ("mulligan-ws-left", dead),
        ("mulligan-ws-live", json.dumps(this_process())),
    ):
        (temp / name).mkdir()
        (temp / f"{name}.owner").write_text(owner)
    verify(tmp_path, "--min-similarity", "0")
    assert not (temp / "mulligan-ws-left").exists() and (temp / "mulligan-ws-live").is_dir()
    assert "removed 1 directory that killed mulligan processes left in" in capsys.readouterr().err
