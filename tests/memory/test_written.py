"""What is kept after an attempt is kept whole: a crash after its reply is logged leaves a
resume to finish it from the reply, asking nothing; a lesson stored before the crash is
created once, never taken for its own twin; a twin strengthened in the log before the crash
has the same counters in the store once the episode resumes."""

from __future__ import annotations

from pathlib import Path

import pytest

from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.store import LessonStore
from mulligan.memory.written import Written
from mulligan.schema import Attempt, Episode, Lesson, LessonScope, LessonSource
from tests.helpers.verdicts import seen

GENERAL = "Check the official government seat before naming a capital city."
DIAGNOSIS = "The answer named Sydney; the capital of Australia is Canberra."


class Crash(Exception):
    pass


def lesson(text: str, kind: str, episode_id: str = "e1", trial: int = 1) -> Lesson:
    return Lesson.model_validate(
        {"id": f"{kind}-{episode_id}", "text": text, "kind": kind,
         "scope": LessonScope(family="capitals"),
         "source": LessonSource(episode_id=episode_id, task_id="t", trial=trial)}
    )  # fmt: skip


def failed_attempt(memory: Memory, episode_id: str = "e1") -> Episode:
    """An episode whose trial 1 failed and is logged, its reflection pending."""
    episode = Episode(id=episode_id, task_id="t", strategy="reflexion-memory")
    memory.start_episode(episode)
    episode.attempts.append(Attempt(task_id="t", trial=1))
    episode.verdicts.append(seen(False))
    memory.finish_attempt(episode, episode.attempts[-1], episode.verdicts[-1], [])
    return episode


def reflection(episode_id: str = "e1") -> Written:
    return Written(
        lessons=[lesson(DIAGNOSIS, "diagnosis", episode_id), lesson(GENERAL, "failure", episode_id)],
        to_store=True,
    )  # fmt: skip


def events(memory: Memory) -> list[tuple[str, str]]:
    return [(e["lesson_id"], e["event"]) for e in memory.log.lesson_events()]


def test_a_reply_logged_before_a_crash_is_finished_on_resume_each_lesson_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = Memory(tmp_path, HashEmbedding())
    episode = failed_attempt(memory)
    logged = memory.log.keep_written

    def crash(*args: object) -> None:  # the general lesson stored, nothing logged of it yet
        raise Crash

    monkeypatch.setattr(memory.log, "keep_written", crash)
    with pytest.raises(Crash):
        memory.keep_written(episode, reflection())
    monkeypatch.setattr(memory.log, "keep_written", logged)
    assert [x.id for x in memory.store.all()] == ["failure-e1"] and events(memory) == []

    again = Memory(tmp_path, HashEmbedding())
    resumed = again.resume_episode("e1")
    assert resumed is not None
    assert again.reflection_to_redo(resumed) is False  # finished from the reply: nothing asked
    assert resumed.lessons_written == ["diagnosis-e1", "failure-e1"]
    assert events(again) == [("diagnosis-e1", "created"), ("failure-e1", "created")]
    assert again.store.get(["failure-e1"])[0].validity.reinforced == 0  # not its own twin
    assert again.log.episode("e1").lessons_written == ["diagnosis-e1", "failure-e1"]  # type: ignore[union-attr]
    assert again.reflection_to_redo(resumed) is False and len(events(again)) == 2


def test_a_crash_before_the_reply_is_logged_leaves_nothing_and_is_asked_again(
    tmp_path: Path,
) -> None:
    memory = Memory(tmp_path, HashEmbedding())
    failed_attempt(memory)
    resumed = Memory(tmp_path, HashEmbedding()).resume_episode("e1")
    assert resumed is not None
    assert memory.reflection_to_redo(resumed) is True
    assert events(memory) == [] and resumed.lessons_written == []


def test_a_twin_strengthened_before_a_crash_has_the_logs_counters_in_the_store_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = Memory(tmp_path, HashEmbedding())
    memory.keep_written(failed_attempt(memory, "e1"), reflection("e1"))
    second = failed_attempt(memory, "e2")
    refresh = LessonStore.refresh

    def crash(*args: object) -> None:  # the log committed, the store's copy not yet rewritten
        raise Crash

    monkeypatch.setattr(LessonStore, "refresh", crash)
    with pytest.raises(Crash):
        memory.keep_written(second, reflection("e2"))  # the same general lesson again
    monkeypatch.setattr(LessonStore, "refresh", refresh)
    assert memory.log.lessons(["failure-e1"])[0].validity.reinforced == 1
    assert memory.store.get(["failure-e1"])[0].validity.reinforced == 0

    again = Memory(tmp_path, HashEmbedding())
    resumed = again.resume_episode("e2")
    assert resumed is not None and again.reflection_to_redo(resumed) is False
    assert again.store.get(["failure-e1"])[0].validity.reinforced == 1
    assert resumed.lessons_written == ["diagnosis-e2", "failure-e1"]
