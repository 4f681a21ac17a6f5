"""The Reflexion arc through the CLI, lessons that persist across processes, validity
(refuted lessons), and export/import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mulligan.actor import Actor
from mulligan.cli import main
from mulligan.evaluator import Evaluator
from mulligan.loop import Loop, LoopSettings
from mulligan.memory import HashEmbedding, Memory, ValiditySection
from mulligan.schema import ExactMatchCheck, Lesson, LessonScope, LessonSource, Task
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel

LESSON = "Recall that the capital of Australia is Canberra, not Sydney; answer with Canberra."
GENERAL = "Name the capital city, not the largest city: for Australia that is Canberra."
TASKS = """\
- id: capital-au
  family: capitals
  prompt: What is the capital city of Australia? Answer with one word.
  checks:
    - {type: exact_match, answer: Canberra, name: capital}
"""
RELATED = """\
- id: capital-au-again
  family: capitals
  prompt: Name the capital city of Australia, in one word.
  checks:
    - {type: exact_match, answer: Canberra, name: capital}
"""


def is_reflection(body: dict[str, Any]) -> bool:
    return "You review a failed attempt" in body["messages"][0]["content"]


def knows_the_lesson(body: dict[str, Any]) -> bool:
    return any("Canberra" in str(m.get("content")) for m in body["messages"])


def capital_policy(body: dict[str, Any]) -> FakeReply:
    """Wrong until a lesson naming Canberra is in the messages; the reflector writes a diagnosis
    and a general lesson that both name it."""
    if is_reflection(body):
        reflection = {"diagnosis": LESSON, "lesson": GENERAL, "tags": ["geography"], "replaces": []}
        return FakeReply(content=json.dumps(reflection))
    return FakeReply(content="Canberra" if knows_the_lesson(body) else "Sydney")


def cli(server: FakeOpenAIServer, memory: Path, *args: str) -> list[str]:
    return [*args, "--base-url", server.base_url, "--memory", str(memory), "--embedding", "hash"]


def write(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path / name


def test_reflexion_arc_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = write(tmp_path, "tasks.yaml", TASKS)
    mem = tmp_path / "mem"
    with FakeOpenAIServer(policy=capital_policy) as server:
        args = cli(
            server, mem, "run", str(tasks), "--strategy", "reflexion", "--trials", "3", "--json"
        )
        assert main(args) == 0
        assert server.violations == []
        actor_requests = [r for r in server.requests if not is_reflection(r)]
    line = json.loads(capsys.readouterr().out.strip())
    assert line["passed"] is True
    first, second = line["attempts"]
    assert not first["verdict"]["passed"] and first["answer"] == "Sydney"
    assert "FAIL capital" in first["verdict"]["feedback"]
    assert second["verdict"]["passed"] and second["answer"] == "Canberra"
    # trial 2 received the lesson in its messages, quoted as data
    assert LESSON not in json.dumps(actor_requests[0]["messages"])
    assert LESSON in json.dumps(actor_requests[1]["messages"])
    assert "quoted data" in actor_requests[1]["messages"][1]["content"]
    memory = Memory(mem, HashEmbedding())
    episode = memory.log.episodes()[0]
    written = memory.lessons(json.loads(episode["lessons_written"]))
    assert len(written) == 1
    lesson = written[0]
    assert lesson.text == LESSON
    assert lesson.source.task_id == "capital-au" and lesson.source.trial == 1
    assert lesson.source.episode_id == episode["id"] and lesson.source.model == "fake-model"
    assert lesson.source.failed_checks == ["capital"]
    assert lesson.validity.helped == 1 and lesson.validity.hurt == 0
    events = [e["event"] for e in memory.log.lesson_events(lesson.id)]
    assert events == ["created", "helped"]
    # reflexion keeps its lessons in the episode: nothing went into the persistent store
    assert memory.store.count() == 0
    assert main(["episodes", "show", episode["id"], "--memory", str(mem)]) == 0
    shown = capsys.readouterr().out
    assert f"lesson given: {lesson.id}" in shown and "PASS" in shown


def run_process(
    server: FakeOpenAIServer, memory: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}
    return subprocess.run(
        [sys.executable, "-m", "mulligan.cli", *cli(server, memory, *args)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def test_lessons_persist_across_processes_for_the_memory_strategy(tmp_path: Path) -> None:
    first, related = write(tmp_path, "a.yaml", TASKS), write(tmp_path, "b.yaml", RELATED)
    mem = tmp_path / "mem"
    with FakeOpenAIServer(policy=capital_policy) as server:
        done = run_process(
            server, mem, "run", str(first), "--strategy", "reflexion-memory", "--json"
        )
        assert done.returncode == 0, done.stderr
        start = len(server.requests)
        later = run_process(
            server, mem, "run", str(related), "--strategy", "reflexion-memory", "--json",
            "--show-candidates",
        )  # fmt: skip
        assert later.returncode == 0, later.stderr
        retrieved = json.dumps(server.requests[start]["messages"])
        assert f"(unverified) {GENERAL}" in retrieved  # the general lesson, retrieved up front
        assert LESSON not in retrieved  # the first task's diagnosis stays in its episode
        assert json.loads(later.stdout)["attempts"][0]["verdict"]["passed"]
        start = len(server.requests)
        plain = run_process(server, mem, "run", str(related), "--strategy", "reflexion", "--json")
        assert plain.returncode == 0, plain.stderr
        assert GENERAL not in json.dumps(server.requests[start]["messages"])
        assert not json.loads(plain.stdout)["attempts"][0]["verdict"]["passed"]
        assert server.violations == []


def plant(memory: Memory, text: str, family: str = "capitals") -> Lesson:
    lesson = Lesson(
        id="planted1",
        text=text,
        scope=LessonScope(family=family),
        source=LessonSource(task_id="elsewhere", model="human"),
    )
    return memory.keep(lesson, persistent=True)


def test_a_lesson_that_keeps_hurting_online_is_counted_and_only_verification_moves_it(
    tmp_path: Path,
) -> None:
    """The online counters count what followed a lesson being shown; they refute nothing
    (tests/memory/test_verification.py: a verified pair that hurts refutes it)."""
    memory = Memory(tmp_path / "mem", HashEmbedding(), rules=ValiditySection(refute_after=3))
    plant(
        memory, "For questions about the capital city of Australia, answer with the largest city."
    )
    task = Task(
        id="capital-au", family="capitals", prompt="What is the capital city of Australia?",
        checks=[ExactMatchCheck(answer="Canberra")],
    )  # fmt: skip
    model = ScriptedModel(policy=lambda messages, tools: "Sydney")
    loop = Loop(
        actor=Actor(model),
        evaluator=Evaluator(),
        settings=LoopSettings(strategy="reflexion-memory", trials=5, show_candidates=True),
        memory=memory,
    )
    episode = loop.run_episode(task)
    assert [bool(a.lesson_ids) for a in episode.attempts] == [True] * 5
    planted = memory.store.get(["planted1"])[0]
    assert planted.validity.status == "candidate"
    assert planted.validity.hurt == 5 and planted.validity.retrieved == 5
    events = [e["event"] for e in memory.log.lesson_events("planted1")]
    assert not [e for e in events if e.startswith("status:")]


def test_export_then_import_round_trips_every_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = Memory(tmp_path / "a", HashEmbedding())
    lesson = plant(memory, "Check the edge case of an empty list before indexing.")
    lesson.validity.helped, lesson.validity.hurt, lesson.validity.retrieved = 2, 1, 4
    lesson.validity.expires_at = 2_000_000_000.5
    lesson.scope.tags = ["lists", "edge cases"]
    lesson.source.failed_checks = ["hidden tests"]
    memory.store.put([lesson])  # the store's copy and the log's record, as a real write keeps them
    memory.log.log_lesson(lesson, stored=True)
    other = Lesson(
        id="second", text="Quote file paths.", kind="insight", scope=LessonScope(family="shell")
    )
    memory.keep(other, persistent=True)
    out = tmp_path / "lessons.jsonl"
    assert (
        main(
            [
                "memory",
                "export",
                "--out",
                str(out),
                "--memory",
                str(tmp_path / "a"),
                "--embedding",
                "hash",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "memory",
                "import",
                str(out),
                "--trust",
                "--memory",
                str(tmp_path / "b"),
                "--embedding",
                "hash",
            ]
        )
        == 0
    )
    before = {x.id: x.model_dump() for x in memory.store.all()}
    after = {x.id: x.model_dump() for x in Memory(tmp_path / "b", HashEmbedding()).store.all()}
    assert before == after and len(after) == 2
    capsys.readouterr()
    assert main(["memory", "stats", "--memory", str(tmp_path / "b"), "--embedding", "hash"]) == 0
    assert "2 lessons" in capsys.readouterr().out
    assert (
        main(
            ["memory", "retract", "second", "--memory", str(tmp_path / "b"), "--embedding", "hash"]
        )
        == 0
    )
    b = Memory(tmp_path / "b", HashEmbedding())
    assert b.store.get(["second"])[0].validity.status == "retracted"
    assert "status:retracted" in [e["event"] for e in b.log.lesson_events("second")]
