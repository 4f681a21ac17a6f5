"""The curator between a transfer study's phases: near-duplicates merged, refuted and useless
lessons dropped, lessons that name their task rewritten or dropped, the playbook capped."""

from __future__ import annotations

import json
from pathlib import Path

from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.curator import (
    Curator,
    CuratorSettings,
    curation_of,
    estimated_tokens,
    names_its_task,
)
from mulligan.schema import Lesson, LessonScope, LessonSource, LessonValidity, Task
from mulligan.testing import ScriptedModel

TAG = "run-learn:curator"


def lesson(
    lesson_id: str, text: str, task_id: str = "t1", helped: int = 0, hurt: int = 0, **more: object
) -> Lesson:
    validity = LessonValidity(retrieved=helped + hurt, helped=helped, hurt=hurt, **more)  # type: ignore[arg-type]
    return Lesson(
        id=lesson_id,
        text=text,
        scope=LessonScope(family="code", task_id=task_id),
        source=LessonSource(task_id=task_id, created_at=float(len(lesson_id))),
        validity=validity,
    )


def stored(memory: Memory, *lessons: Lesson) -> list[Lesson]:
    """Straight into the store (no folding of twins on the way in: the curator's job here)."""
    memory.store.put(list(lessons))
    for one in lessons:
        memory.log.log_lesson(one, stored=True)
    return list(lessons)


TASKS = {
    "t1": Task(id="t1", family="code", prompt="Write circular_shift(x, n).", metadata={
        "entry_point": "circular_shift"}),
    "t2": Task(id="t2", family="code", prompt="Write parse(s)."),
}  # fmt: skip


def test_the_curator_merges_two_near_duplicates_and_drops_a_refuted_lesson(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    twin_a = lesson("a", "Always check for empty lists before indexing into them.", helped=2)
    twin_b = lesson("bb", "Check for empty lists before indexing into them.", "t2", helped=1)
    refuted = lesson("ccc", "Return early from every loop.", hurt=3, status="refuted")
    useless = lesson("dddd", "Print the answer twice before returning.", hurt=2)
    general = lesson("eeeee", "Handle negative numbers when parsing integers.", "t2")
    lessons = stored(memory, twin_a, twin_b, refuted, useless, general)
    curation = Curator(memory, None, CuratorSettings(merge_similarity=0.9)).curate(
        lessons, TASKS, TAG
    )
    assert [k.id for k in curation.kept] == ["a", "eeeee"]
    assert curation.dropped == {
        "bb": "merged into a",
        "ccc": "refuted",
        "dddd": "never helped (used 2 times)",
    }
    merged = memory.lessons(["a", "bb"])
    assert (merged[0].validity.helped, merged[1].validity.status) == (3, "superseded")
    assert merged[1].validity.superseded_by == "a"
    assert memory.lessons(["dddd"])[0].validity.status == "retracted"
    # only the kept ones are found by retrieval from now on
    found = memory.store.search("empty lists before indexing", 5, family="code")
    found_ids = [found_lesson.id for found_lesson, _ in found]
    assert found_ids[0] == "a" and not {"bb", "ccc", "dddd"} & set(found_ids)
    again = curation_of(memory.log, TAG)
    assert again is not None
    assert [k.id for k in again.kept] == ["a", "eeeee"] and again.dropped == curation.dropped
    assert len(again.before) == 5
    assert again.tokens(again.before) == sum(estimated_tokens(x.text) for x in lessons)


def test_a_lesson_that_names_its_task_is_rewritten_in_one_call_or_dropped(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    named = lesson("a", "In this problem, make sure circular_shift handles shifts past the end.")
    hopeless = lesson("bb", "For circular_shift, compare with > rather than >=.")
    lessons = stored(memory, named, hopeless)
    rewrite = {"lesson": "When rotating digits, handle shifts larger than the number of digits."}
    model = ScriptedModel([json.dumps(rewrite), json.dumps({"lesson": ""})])
    curation = Curator(memory, model).curate(lessons, TASKS, TAG)
    assert "In this problem" in model.calls[0].messages[0]["content"]
    (kept,) = curation.kept
    assert kept.text == rewrite["lesson"] and kept.id not in ("a", "bb")
    assert kept.source.task_id == "t1" and "rewritten" in kept.scope.tags
    assert curation.dropped == {
        "a": f"named its task; rewritten as {kept.id}",
        "bb": "named its task; no general rewrite",
    }
    assert memory.lessons(["a"])[0].validity.superseded_by == kept.id
    model.assert_done()


def test_without_a_model_a_lesson_that_names_its_task_is_dropped(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    lessons = stored(memory, lesson("a", "In this task the list may be empty; check it."))
    curation = Curator(memory, None).curate(lessons, TASKS, TAG)
    assert curation.kept == [] and curation.dropped == {"a": "named its task; no general rewrite"}


def test_the_playbook_is_capped_to_its_token_budget_keeping_the_most_trusted(
    tmp_path: Path,
) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    texts = ["Handle negative numbers when parsing integers.", "Sort before you deduplicate."]
    texts += ["Test the empty input first, then one element, then many."]
    lessons = stored(
        memory,
        lesson("a", texts[0], helped=1),
        lesson("bb", texts[1], helped=3),
        lesson("ccc", texts[2]),
    )
    budget = estimated_tokens(texts[1]) + estimated_tokens(texts[0])
    curation = Curator(memory, None, CuratorSettings(token_budget=budget)).curate(
        lessons, TASKS, TAG
    )
    assert [k.id for k in curation.kept] == ["bb", "a"]
    assert curation.dropped == {"ccc": f"over the token budget ({budget})"}
    assert curation.tokens(curation.kept) <= budget


def test_what_names_a_task() -> None:
    task = TASKS["t1"]
    assert names_its_task("In this problem, we need to ensure the bucket is used.", task)
    assert names_its_task("Call circular_shift with n modulo the length.", task)
    assert names_its_task("For the given function, return a string.", None)
    assert not names_its_task("Rotate digits with slicing; handle shifts past the end.", task)
    assert not names_its_task("Check this before returning: the types match.", task)
