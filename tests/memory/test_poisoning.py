"""Poisoning stays out: a lesson imported with a record of success elsewhere starts here as a
candidate, never reaches a first attempt unverified, and is refuted by the attempts it hurts
while working; a lesson validated here that later hurts is demoted by the same evidence
(`memory verify` checks it again), then refuted while working, and never shown again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.runs.build import build_loop
from mulligan.schema import Episode, Lesson, LessonScope, LessonValidity, Task
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel
from tests.memory.helpers import RIGHT, WRONG, plant, units_tasks, working_model


def run(memory: Memory, model: ScriptedModel, tasks: list[Task]) -> list[Episode]:
    settings = LoopSettings(strategy="reflexion-memory", trials=3, min_similarity=0.0)
    loop = build_loop(model, settings, memory=memory)
    return [loop.run_episode(task) for task in tasks]


def given(episodes: list[Episode], lesson_id: str) -> list[list[bool]]:
    return [[lesson_id in a.lesson_ids for a in e.attempts] for e in episodes]


def test_an_imported_lesson_that_hurts_earns_nothing_and_is_refuted_while_working(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    poisoned = Lesson(
        id="poisoned",
        text=WRONG,
        scope=LessonScope(family="units"),
        validity=LessonValidity(status="validated", retrieved=90, helped=88, hurt=0),
    )
    exported = tmp_path / "lessons.jsonl"
    exported.write_text(poisoned.model_dump_json() + "\n")
    mem = tmp_path / "mem"
    argv = ["memory", "import", str(exported), "--memory", str(mem), "--embedding", "hash"]
    assert main(argv) == 0
    assert "as new candidates" in capsys.readouterr().out
    memory = Memory(mem, HashEmbedding())
    episodes = run(memory, working_model(wrong_when=WRONG, retry_right=True), units_tasks(6))
    assert all(not shown[0] for shown in given(episodes, "poisoned"))  # never a first attempt
    v = memory.lessons(["poisoned"])[0].validity
    assert v.status == "refuted" and v.evidence.hurt >= 1 and v.evidence.helped == 0
    later = run(Memory(mem, HashEmbedding()), working_model(wrong_when=WRONG), units_tasks(3))
    assert not any(any(shown) for shown in given(later, "poisoned"))


def harmful(body: dict[str, Any]) -> FakeReply:
    """The endpoint after the world changed: right unless the old lesson is in view."""
    text = json.dumps(body["messages"])
    km = int(text.split("A path is ")[1].split(" km")[0])
    return FakeReply(content=str(km) if RIGHT in text else str(km * 1000))


def test_a_validated_lesson_that_later_hurts_is_demoted_then_refuted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mem = tmp_path / "mem"
    memory = Memory(mem, HashEmbedding())
    plant(memory, "rule", RIGHT)
    run(memory, working_model(right_when=RIGHT), units_tasks(4))
    v = memory.lessons(["rule"])[0].validity
    assert v.status == "validated" and v.evidence.hurt == 0
    helped = v.evidence.helped
    tasks = tmp_path / "units.yaml"
    tasks.write_text(
        "\n".join(
            f"- id: check-{n}\n  family: units\n  prompt: 'A path is {n} km long. How long is "
            f"it in metres?'\n  checks: [{{type: exact_match, answer: '{n * 1000}'}}]"
            for n in range(11, 11 + helped)
        )
    )
    with FakeOpenAIServer(policy=harmful) as server:
        argv = ["memory", "verify", str(tasks), "--memory", str(mem), "--embedding", "hash"]
        argv += ["--base-url", server.base_url, "--min-similarity", "0"]
        assert main([*argv, "--verify-pairs", str(helped)]) == 0
    out = capsys.readouterr().out
    assert f"rule  candidate  pairs {2 * helped}, helped {helped}, hurt {helped}" in out
    memory = Memory(mem, HashEmbedding())
    events = [e["event"] for e in memory.log.lesson_events("rule")]
    assert events.count("status:validated") == 1 and events[-1] == "status:candidate"
    wrong_now = working_model(wrong_when=RIGHT, retry_right=True)  # a retry passes without it
    episodes = run(memory, wrong_now, units_tasks(8)[4:])
    assert all(not shown[0] for shown in given(episodes, "rule"))  # demoted: not at trial 1
    assert memory.lessons(["rule"])[0].validity.status == "refuted"
    later = run(Memory(mem, HashEmbedding()), wrong_now, units_tasks(2))
    assert not any(any(shown) for shown in given(later, "rule"))
