"""The lesson store read without opening chromadb, which writes to its files whenever it
opens them (its SQLite file on open, an index's files on a read): for the commands that
only read a memory.

Which embedding the store was built with comes from chroma's own SQLite file opened
read-only; the lessons come from the episode log's lesson table, which holds every stored
lesson's whole record (the store's metadata are a cache of it); a search embeds the usable
ones here and ranks them as `LessonStore.search` does. That costs one embedding per usable
lesson a search (minilm: a few milliseconds each on a CPU), where the store's index costs
one; exact cosine similarity instead of the index's approximate neighbours. The store's
format (its collections' names, each lesson's metadata) is written here too, for store.py.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import time
from pathlib import Path

from mulligan.errors import UserError
from mulligan.inputs.memory_files import read_only
from mulligan.memory.embeddings import Embedder, spec_for
from mulligan.memory.validity import ACTIVE, GENERAL, is_usable
from mulligan.schema import Lesson

FAMILY_PREFIX = "lessons-"
"""The names of the store's collections of one family each (`LessonStore.collection_name`)."""


def metadata_of(lesson: Lesson) -> dict[str, str | int | float | bool]:
    """A lesson's metadata in the store: scalars for filtering, plus the whole record as JSON
    for exact round trips."""
    v = lesson.validity
    return {
        "kind": lesson.kind,
        "family": lesson.scope.family,
        "task_id": lesson.scope.task_id,
        "tags": ",".join(lesson.scope.tags),
        "status": v.status,
        "retrieved": v.retrieved,
        "helped": v.helped,
        "hurt": v.hurt,
        "confidence": v.confidence,
        "expires_at": v.expires_at if v.expires_at is not None else -1.0,
        "source_task": lesson.source.task_id,
        "source_episode": lesson.source.episode_id,
        "model": lesson.source.model,
        "created_at": lesson.source.created_at,
        "record": lesson.model_dump_json(),
    }


def stored_embedding(store: Path) -> str | None:
    """The embedding the store at `store` (a memory's `lessons/`) was built with; None when
    it holds no collection or its file cannot be read without writing (a crash left a
    journal to roll back, which the next writer does)."""
    path = store / "chroma" / "chroma.sqlite3"
    if not path.is_file():
        return None
    busy = any(Path(f"{path}-{side}").exists() for side in ("wal", "journal"))
    query = (
        "select m.str_value from collection_metadata m join collections c"
        " on c.id = m.collection_id where m.key = 'embedder' and c.name like ? limit 1"
    )
    try:
        with contextlib.closing(read_only(path, busy)) as connection:
            row = connection.execute(query, [f"{FAMILY_PREFIX}%"]).fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row and row[0] else None


def refuse_another(location: str, built_with: str | None, embedding: str) -> None:
    """A store is searched with the embedding it was built with, or not at all."""
    if built_with and built_with != embedding:
        raise UserError(
            f"the lesson store at {location} was built with the {built_with} embedding; "
            f"pass --embedding {spec_for(built_with)} or use another --memory directory"
        )


def search_lessons(
    lessons: list[Lesson], embedder: Embedder, text: str, k: int
) -> list[tuple[Lesson, float]]:
    """The k usable general lessons not dissimilar to `text` (cosine similarity at least 0),
    ranked by similarity weighted by confidence (as `LessonStore.search`)."""
    now = time.time()
    usable = [x for x in lessons if is_usable(x, now, ACTIVE) and x.kind in GENERAL]
    if not usable or k <= 0:
        return []
    query, *vectors = embedder.embed([text] + [lesson.text for lesson in usable])
    similar = [
        (lesson, cosine(query, vector)) for lesson, vector in zip(usable, vectors, strict=True)
    ]
    ranked = [
        (x, similarity * x.validity.confidence) for x, similarity in similar if similarity >= 0
    ]
    ranked.sort(key=lambda pair: pair[1], reverse=True)
    return ranked[:k]


def cosine(a: list[float], b: list[float]) -> float:
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0
