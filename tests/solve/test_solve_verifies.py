"""`solve`'s repair pipeline verifies the project's candidate lessons while working, as the
agent loop does: its first candidate never sees one, and from candidate 2 on each candidate
is assigned to be shown it or not, in blocks of two across sessions, its outcome the
lesson's evidence."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import pytest

from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import Lesson, LessonScope, LessonSource
from mulligan.testing import FakeReply
from tests.helpers.solving import NO_LESSON, reflecting, solve
from tests.solve.projects import CHECK, RIGHT, block, make_shapes, prompts_sent

LESSON = "The area of a rectangle is its width times its height."
WRONGS = [
    block("    return width + height", f"    return {wrong}")
    for wrong in ("width - height", "height - width", "width + height + 1", "width // height")
]


def right_with_the_lesson() -> Any:
    """The right edit when the lesson is in the prompt, else a wrong one never made before."""
    lock, wrongs = threading.Lock(), itertools.cycle(WRONGS)

    def policy(body: dict[str, Any]) -> FakeReply:
        if reflecting(body):
            return FakeReply(content=NO_LESSON)
        if LESSON in str(body["messages"][-1]["content"]):
            return FakeReply(content=RIGHT)
        with lock:
            return FakeReply(content=next(wrongs))

    return policy


def test_later_candidates_are_assigned_the_projects_candidate_across_sessions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_shapes(tmp_path / "shapes")
    lesson = Lesson(
        id="area-rule", text=LESSON, scope=LessonScope(family="shapes"),
        source=LessonSource(task_id="elsewhere", model="human"),
    )  # fmt: skip
    Memory(tmp_path / "mem", HashEmbedding()).keep(lesson, persistent=True)
    sessions = []
    for _ in range(2):  # two sessions on one memory: one block at candidate 2
        code, server = solve(
            tmp_path, project, right_with_the_lesson(), "--trials", "2", "--strategy",
            "patch", check=CHECK,
        )  # fmt: skip
        capsys.readouterr()
        sessions.append((code, prompts_sent(server.requests)))
    assert all(LESSON not in sent[0] for _, sent in sessions)  # candidate 1: never
    shown_at_2 = [LESSON in sent[1] for _, sent in sessions]
    assert sorted(shown_at_2) == [False, True]  # one of each arm
    assert [code for code, _ in sessions] == [0 if shown else 1 for shown in shown_at_2]
    memory = Memory(tmp_path / "mem", HashEmbedding())
    halves = memory.log.assignments_of_lesson("area-rule")
    assert [(a.trial, a.shown, a.passed) for a in halves] == [
        (2, shown, shown) for shown in shown_at_2
    ]
    e = memory.lessons(["area-rule"])[0].validity.evidence
    assert (e.pairs, e.helped, e.hurt) == (1, 1, 0)
