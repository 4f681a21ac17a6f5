"""The lesson store's index of every family: a search without a family is one query there,
found the same lessons as asking every family would, and a store written before the index
existed gets it filled on first use."""

from __future__ import annotations

from pathlib import Path

from mulligan.memory import HashEmbedding
from mulligan.memory.store import EVERY_LESSON, LessonStore
from mulligan.schema import Lesson, LessonScope, LessonValidity

TEXTS = {
    "a": ("code", "Check for empty lists before indexing into them."),
    "b": ("text", "Check empty strings before slicing them."),
    "c": ("math", "Round floats only at the end of a computation."),
    "d": ("code", "Sort the items before removing duplicates."),
}


def lessons() -> list[Lesson]:
    return [
        Lesson(id=i, text=text, scope=LessonScope(family=family))
        for i, (family, text) in TEXTS.items()
    ]


def nearest(store: LessonStore, text: str) -> list[str]:
    return [lesson.id for lesson, _ in store.similar(text, 2)]


def test_a_search_without_a_family_finds_the_nearest_of_every_family(tmp_path: Path) -> None:
    store = LessonStore(str(tmp_path), HashEmbedding())
    store.put(lessons())
    assert nearest(store, "check for empty lists before slicing strings") == ["a", "b"]
    assert [x.id for x, _ in store.similar("round floats", 1, family="math")] == ["c"]
    store.refresh(["c"], lambda ids: [lesson_refuted("c")])
    (found,) = [x for x, _ in store.similar("round floats at the end", 1)]
    assert found.validity.status == "refuted"  # the index's copy follows the refresh
    assert store.count() == 4  # the index is not counted as a family


def lesson_refuted(lesson_id: str) -> Lesson:
    family, text = TEXTS[lesson_id]
    return Lesson(
        id=lesson_id,
        text=text,
        scope=LessonScope(family=family),
        validity=LessonValidity(status="refuted", hurt=3),
    )


def test_a_store_written_before_the_index_gets_it_filled(tmp_path: Path) -> None:
    store = LessonStore(str(tmp_path), HashEmbedding())
    store.put(lessons())
    store._client.delete_collection(EVERY_LESSON)  # as a store from before the index
    again = LessonStore(str(tmp_path), HashEmbedding())
    assert nearest(again, "check for empty lists before slicing strings") == ["a", "b"]
    assert again._client.get_collection(EVERY_LESSON).count() == 4
