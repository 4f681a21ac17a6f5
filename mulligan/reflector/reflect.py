"""The reflector: turns (task, attempt, verdict) into short verbal lessons."""

from __future__ import annotations

import logging
import time
import uuid

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mulligan import prompts
from mulligan.errors import ModelError
from mulligan.jsontext import first_json_object
from mulligan.llm.base import ChatModel, Message
from mulligan.schema import (
    Attempt,
    Lesson,
    LessonScope,
    LessonSource,
    Task,
    Usage,
    Verdict,
    shorten,
)

log = logging.getLogger("mulligan")


class _DraftLesson(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str = Field(min_length=8, max_length=600)
    kind: str = "failure"
    tags: list[str] = Field(default_factory=list)


class _Reflection(BaseModel):
    model_config = ConfigDict(extra="ignore")
    lessons: list[_DraftLesson] = Field(max_length=5)


def trajectory_text(attempt: Attempt, per_item: int = 300, total: int = 6000) -> str:
    """The attempt for the prompt: every step, long texts and observations shortened."""
    lines = [step.as_text(per_item) for step in attempt.steps]
    lines.append(f"stopped: {attempt.stop_reason}")
    return shorten("\n".join(lines), total)


class Reflector:
    def __init__(self, model: ChatModel, max_lessons: int = 2) -> None:
        self.model = model
        self.max_lessons = max_lessons
        self.usage = Usage()

    def reflect(
        self,
        task: Task,
        attempt: Attempt,
        verdict: Verdict,
        in_play: list[Lesson],
        episode_id: str = "",
    ) -> list[Lesson]:
        """Lessons from a failed attempt; none (logged) if the model twice gives invalid JSON."""
        prompt = prompts.render(
            "reflect",
            task=task.prompt,
            trajectory=trajectory_text(attempt),
            answer=shorten(attempt.answer or "(no answer)", 2000),
            feedback=verdict.feedback,  # built from feedback-visible checks only
            lessons=[lesson.text for lesson in in_play],
            max_lessons=self.max_lessons,
        )
        messages: list[Message] = [{"role": "user", "content": prompt}]
        for _ in range(2):
            try:
                response = self.model.chat(messages)
            except ModelError as exc:
                log.warning("reflection failed for %s: %s", task.id, exc)
                return []
            self.usage = self.usage + response.usage
            try:
                drafts = _parse(response.text).lessons[: self.max_lessons]
                break
            except (ValueError, ValidationError) as exc:
                messages += [
                    {"role": "assistant", "content": response.text},
                    {
                        "role": "user",
                        "content": f"That was not valid: {exc}. Reply with the JSON object only.",
                    },
                ]
        else:
            log.warning("reflection for %s gave invalid JSON twice; going on without", task.id)
            return []
        failed = [c.name for c in verdict.checks if not c.passed]
        return [
            Lesson(
                id=uuid.uuid4().hex[:12],
                text=draft.text.strip(),
                kind="insight" if draft.kind == "insight" else "failure",
                scope=LessonScope(family=task.family, task_id=task.id, tags=draft.tags[:8]),
                source=LessonSource(
                    episode_id=episode_id,
                    task_id=task.id,
                    trial=attempt.trial,
                    model=self.model.name,
                    created_at=time.time(),
                    failed_checks=failed,
                ),
            )
            for draft in drafts
        ]


def _parse(text: str) -> _Reflection:
    found = first_json_object(text)
    if found is None:
        raise ValueError("no JSON object found")
    return _Reflection.model_validate(found)
