"""The reflector: turns (task, attempt, verdict) into short verbal lessons."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Literal

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
    tags: list[str] = Field(default_factory=list)
    replaces: list[int] = Field(default_factory=list)
    """1-based numbers of lessons in play that this one corrects or replaces."""


class _Reflection(BaseModel):
    model_config = ConfigDict(extra="ignore")
    lessons: list[_DraftLesson] = Field(max_length=5)


@dataclass
class Reflection:
    lessons: list[Lesson] = field(default_factory=list)
    replaces: dict[str, list[Lesson]] = field(default_factory=dict)
    """New lesson id -> the lessons in play it supersedes."""


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

    def take_usage(self) -> Usage:
        """What the reflector's calls cost since the last time this was taken."""
        usage, self.usage = self.usage, Usage()
        return usage

    def reflect(
        self,
        task: Task,
        attempt: Attempt,
        verdict: Verdict,
        in_play: list[Lesson],
        episode_id: str = "",
    ) -> Reflection:
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
        drafts = self._drafts(prompt, task)
        failed = [c.name for c in verdict.checks if not c.passed]
        reflection = Reflection()
        for draft in drafts:
            lesson = self._lesson(draft, "failure", task, attempt.trial, episode_id, failed)
            reflection.lessons.append(lesson)
            replaced = [in_play[n - 1] for n in draft.replaces if 1 <= n <= len(in_play)]
            if replaced:
                reflection.replaces[lesson.id] = replaced
        return reflection

    def insight(
        self,
        task: Task,
        failed: Attempt,
        failed_verdict: Verdict,
        passed: Attempt,
        episode_id: str = "",
    ) -> list[Lesson]:
        """At most one insight from an attempt that passed after one that failed."""
        prompt = prompts.render(
            "insight",
            task=task.prompt,
            failed=trajectory_text(failed, total=3000),
            feedback=failed_verdict.feedback,
            passed=trajectory_text(passed, total=3000),
            answer=shorten(passed.answer or "", 1500),
        )
        drafts = self._drafts(prompt, task)[:1]
        return [self._lesson(d, "insight", task, passed.trial, episode_id, []) for d in drafts]

    def _drafts(self, prompt: str, task: Task) -> list[_DraftLesson]:
        """The model's lessons as validated JSON: one retry with the error, then none."""
        messages: list[Message] = [{"role": "user", "content": prompt}]
        for _ in range(2):
            try:
                response = self.model.chat(messages)
            except ModelError as exc:
                log.warning("reflection failed for %s: %s", task.id, exc)
                return []
            self.usage = self.usage + response.usage
            try:
                return _parse(response.text).lessons[: self.max_lessons]
            except (ValueError, ValidationError) as exc:
                retry = f"That was not valid: {exc}. Reply with the JSON object only."
                messages += [
                    {"role": "assistant", "content": response.text},
                    {"role": "user", "content": retry},
                ]
        log.warning("reflection for %s gave invalid JSON twice; going on without", task.id)
        return []

    def _lesson(
        self,
        draft: _DraftLesson,
        kind: Literal["failure", "insight"],
        task: Task,
        trial: int,
        episode_id: str,
        failed_checks: list[str],
    ) -> Lesson:
        return Lesson(
            id=uuid.uuid4().hex[:12],
            text=draft.text.strip(),
            kind=kind,
            scope=LessonScope(family=task.family, task_id=task.id, tags=draft.tags[:8]),
            source=LessonSource(
                episode_id=episode_id,
                task_id=task.id,
                trial=trial,
                model=self.model.name,
                created_at=time.time(),
                failed_checks=failed_checks,
            ),
        )


def _parse(text: str) -> _Reflection:
    found = first_json_object(text)
    if found is None:
        raise ValueError("no JSON object found")
    return _Reflection.model_validate(found)
