"""Lessons as the store keeps them: scalar metadata for filtering beside the whole record,
and lessons read back from an export. No chromadb here (store.py is the only module that
imports it)."""

from __future__ import annotations

import json

from mulligan.schema import Lesson, LessonValidity


def metadata_of(lesson: Lesson) -> dict[str, str | int | float | bool]:
    """Scalars for filtering, plus the whole record as JSON for exact round trips."""
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


def lessons_from_jsonl(lines: list[str], trust: bool) -> list[Lesson]:
    """Exported lessons; untrusted ones as fresh candidates (counters reset)."""
    lessons = [Lesson.model_validate(json.loads(line)) for line in lines if line.strip()]
    if not trust:
        for lesson in lessons:
            lesson.validity = LessonValidity(expires_at=lesson.validity.expires_at)
    return lessons
