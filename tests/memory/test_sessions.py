"""A persistent agent across processes, as a user runs it: a lesson written by one
`mulligan run` is tried by a later one (no --show-candidates) on attempts it makes anyway,
validated by what those attempts show, and then reaches a later process's first attempt;
`memory show` and the viewer say which attempts it was assigned to and what it earned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.reading import MemoryReader
from mulligan.testing import FakeOpenAIServer, FakeReply
from mulligan.view import pages
from mulligan.view.links import ServerLinks

GENERAL = "Name the capital city, not the largest city: for Australia that is Canberra."
WRITES = "ALPHA"


def task_file(path: Path, names: list[str]) -> Path:
    path.write_text(
        "".join(
            f"- id: {name}\n  family: capitals\n  prompt: ({name}) What is the capital city "
            "of Australia? One word.\n  checks: [{type: exact_match, answer: Canberra}]\n"
            for name in names
        )
    )
    return path


def policy(body: dict[str, Any]) -> FakeReply:
    """Right only with the lesson in view; the reviewer writes it on the ALPHA task only."""
    text = json.dumps(body["messages"])
    if "You review a failed attempt" in body["messages"][0]["content"]:
        lesson = GENERAL if WRITES in text else ""
        return FakeReply(content=json.dumps({"diagnosis": "Think again.", "lesson": lesson}))
    return FakeReply(content="Canberra" if GENERAL in text else "Sydney")


def run(server: FakeOpenAIServer, memory: Path, tasks: Path) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}
    done = subprocess.run(
        [sys.executable, "-m", "mulligan.cli", "run", str(tasks), "--strategy",
         "reflexion-memory", "--trials", "3", "--min-similarity", "0", "--json",
         "--base-url", server.base_url, "--memory", str(memory), "--embedding", "hash"],
        capture_output=True, text=True, timeout=180, env=env,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def actor_requests(server: FakeOpenAIServer, since: int) -> list[str]:
    return [
        json.dumps(r["messages"])
        for r in server.requests[since:]
        if "You review a failed attempt" not in r["messages"][0]["content"]
    ]


def test_a_lesson_from_one_process_is_tried_validated_and_shown_first_in_later_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mem = tmp_path / "mem"
    with FakeOpenAIServer(policy=policy) as server:
        run(server, mem, task_file(tmp_path / "a.yaml", [f"{WRITES}-1"]))
        (lesson,) = [x for x in Memory(mem, HashEmbedding()).store.all() if x.text == GENERAL]
        assert lesson.validity.status == "candidate"
        start = len(server.requests)
        run(server, mem, task_file(tmp_path / "b.yaml", [f"b-{n}" for n in range(4)]))
        sent = actor_requests(server, start)
        memory = Memory(mem, HashEmbedding())
        later = [memory.log.episode(r["id"]) for r in memory.log.episodes()]
        later = [e for e in later if e and e.task_id.startswith("b-")]
        assert len(later) == 4
        assert lesson.id not in later[0].attempts[0].lesson_ids  # trial 1: no candidate
        assert any(GENERAL in s and "(unverified)" not in s for s in sent)  # tried unmarked
        events = memory.log.lesson_events(lesson.id)
        validated = next(n for n, e in enumerate(events) if e["event"] == "status:validated")
        assert all(
            n > validated
            for n, e in enumerate(events)
            if e["trial"] == 1 and e["event"] == "retrieved"
        )  # trial 1 saw it only once it was validated
        at_2 = [a.shown for a in memory.log.assignments_of_lesson(lesson.id) if a.trial == 2]
        assert at_2[0] != at_2[1]  # a block: one of each
        memory = Memory(mem, HashEmbedding())
        v = memory.lessons([lesson.id])[0].validity
        assert v.status == "validated" and v.evidence.helped >= 2 and v.evidence.hurt == 0
        start = len(server.requests)
        (third,) = run(server, mem, task_file(tmp_path / "c.yaml", ["c-1"]))
        assert GENERAL in actor_requests(server, start)[0]  # validated: from trial 1
        assert third["passed"] and len(third["attempts"]) == 1
    assert main(["memory", "show", lesson.id, "--memory", str(mem)]) == 0
    shown = capsys.readouterr().out
    assert "assigned to" in shown and "while working" in shown
    assert ": shown, passed, pair 1" in shown and ": withheld, failed, pair 1" in shown
    assert "by chance alone" in shown
    assert main(["memory", "show", lesson.id, "--memory", str(mem), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assigned = memory.log.assignments_of_lesson(lesson.id)
    assert len(record["assignments"]) == len(assigned) >= 4
    reader = MemoryReader(mem)
    page = pages.lesson_page(reader, ServerLinks(), lesson.id)
    assert "Verification while working" in page and f"{len(assigned)} later attempt" in page
    with_ = next(a for a in assigned if a.shown)
    episode = pages.episode_page(reader, ServerLinks(), with_.episode_id)
    assert "shown by assignment" in episode
    without = next(a for a in assigned if not a.shown)
    episode = pages.episode_page(reader, ServerLinks(), without.episode_id)
    same = [a for a in assigned if a.episode_id == without.episode_id]
    assert "withheld by assignment" in episode
    assert episode.count('"badge assigned"') == sum(a.shown for a in same)
