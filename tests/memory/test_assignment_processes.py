"""Two processes verifying one candidate while working, each running its tasks four at a
time on one memory: every judged half is paired at most once, with a half of the other arm
at its trial position from another episode; the evidence is what the pairs imply; every
later attempt was shown the candidate exactly when its logged arm says so."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from mulligan.memory import HashEmbedding, Memory
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.cli.test_resume import environment
from tests.memory.helpers import DIAGNOSIS, RIGHT, plant, prompt_of
from tests.memory.test_assignment_crashes import TASKS


def answer(body: dict[str, Any]) -> FakeReply:
    """Right with the candidate in view on an even number of km, else wrong; a little delay
    so the two processes' attempts interleave."""
    messages = body["messages"]
    if "You review a failed attempt" in messages[0]["content"]:
        return FakeReply(content=json.dumps({"diagnosis": DIAGNOSIS, "lesson": ""}))
    text = prompt_of(messages)
    km = int(text.split("A path is ")[1].split(" km")[0])
    right = RIGHT in text and km % 2 == 0
    return FakeReply(content=str(km * 1000) if right else str(km), delay=0.02)


def test_two_processes_on_one_memory_count_every_pair_once(tmp_path: Path) -> None:
    (tmp_path / "tasks.yaml").write_text(TASKS)
    mem = tmp_path / "mem"
    plant(Memory(mem, HashEmbedding()), "rule", RIGHT)
    with FakeOpenAIServer(policy=answer) as server:
        argv = [
            sys.executable, "-m", "mulligan.cli", "run", str(tmp_path / "tasks.yaml"),
            "--strategy", "reflexion-memory", "--trials", "3", "--min-similarity", "0",
            "--base-url", server.base_url, "--memory", str(mem), "--embedding", "hash",
            "--concurrency", "4", "--validate-after", "50", "--refute-after", "50",
        ]  # fmt: skip
        runs = [
            subprocess.Popen(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=environment(),
            )  # fmt: skip
            for _ in range(2)
        ]
        for run in runs:
            _, err = run.communicate(timeout=120)
            assert run.returncode in (0, 1), err
    memory = Memory(mem, HashEmbedding())
    halves = memory.log.assignments_of_lesson("rule")
    assert len(halves) >= 12 and all(half.told for half in halves)
    pairs: dict[int, list[Any]] = defaultdict(list)
    for half in halves:
        if half.pair:
            pairs[half.pair].append(half)
    helped = hurt = 0
    for pair in pairs.values():
        with_, without = sorted(pair, key=lambda half: not half.shown)
        assert len(pair) == 2 and with_.shown and not without.shown
        assert with_.trial == without.trial and with_.episode_id != without.episode_id
        helped += bool(with_.passed and not without.passed)
        hurt += bool(without.passed and not with_.passed)
    e = memory.lessons(["rule"])[0].validity.evidence
    assert (e.pairs, e.helped, e.hurt) == (len(pairs), helped, hurt) and helped > 0
    unpaired = Counter((h.trial, h.shown) for h in halves if not h.pair)
    assert not any(unpaired[(trial, True)] and unpaired[(trial, False)] for trial in (2, 3))
    for half in halves:  # what each attempt was shown is its arm
        (attempt,) = [a for a in memory.log.episode(half.episode_id).attempts  # type: ignore[union-attr]
                      if a.trial == half.trial]  # fmt: skip
        assert ("rule" in attempt.lesson_ids) == half.shown
    events = Counter(
        (e["event"], e["episode_id"], e["trial"]) for e in memory.log.lesson_events("rule")
    )
    assert all(n == 1 for (name, *_), n in events.items() if name in ("assigned", "judged"))
