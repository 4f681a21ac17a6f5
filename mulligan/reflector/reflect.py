"""The reflector: turns (task, attempt, verdict) into short verbal lessons."""

from __future__ import annotations

import functools
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mulligan import prompts
from mulligan.errors import ModelError
from mulligan.jsontext import first_json_object
from mulligan.llm.base import SHORT_REPLY_TOKENS, ChatModel, Message
from mulligan.schema import (
    Attempt,
    Lesson,
    LessonScope,
    LessonSource,
    Task,
    Usage,
    Verdict,
)
from mulligan.text_cut import head

log = logging.getLogger("mulligan")


class _Draft(BaseModel):
    """What the model wrote: a diagnosis of this attempt and at most one general lesson."""

    model_config = ConfigDict(extra="ignore")
    diagnosis: str = ""
    lesson: str = ""
    tags: list[str] = Field(default_factory=list)
    replaces: list[int] = Field(default_factory=list)
    """1-based numbers of the advice in play that the lesson corrects or replaces."""


def _schema(*keys: str) -> dict[str, Any]:
    """`response_format` asking for an object with these keys (strings, or lists for tags and
    replaces); every key required, as strict structured output wants."""
    types: dict[str, dict[str, Any]] = {
        "diagnosis": {"type": "string"},
        "lesson": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "replaces": {"type": "array", "items": {"type": "integer"}},
    }
    schema = {
        "type": "object",
        "properties": {key: types[key] for key in keys},
        "required": list(keys),
        "additionalProperties": False,
    }
    return {
        "type": "json_schema",
        "json_schema": {"name": "reflection", "strict": True, "schema": schema},
    }


REFLECTION_FORMAT = _schema("diagnosis", "lesson", "tags", "replaces")
INSIGHT_FORMAT = _schema("lesson", "tags")
MIN_TEXT = 8
"""Shorter texts (an empty string, "...", "none") are no lesson or diagnosis."""


@dataclass
class Reflection:
    diagnosis: Lesson | None = None
    """Specific to this attempt: carried within the episode, never into the store."""
    lessons: list[Lesson] = field(default_factory=list)
    """At most one general lesson: the only kind that may go to the persistent store."""
    replaces: dict[str, list[Lesson]] = field(default_factory=dict)
    """New lesson id -> the lessons in play it supersedes."""
    failed: str = ""
    """Why the reflector's model gave no reply (the endpoint's error); empty when it did."""


def trajectory_text(attempt: Attempt, per_item: int = 300, total: int = 6000) -> str:
    """The attempt for the prompt: every step, long texts and observations shortened."""
    lines = [step.as_text(per_item) for step in attempt.steps]
    lines.append(f"stopped: {attempt.stop_reason}")
    return head("\n".join(lines), total)


class Reflector:
    def __init__(self, model: ChatModel) -> None:
        self.model = model
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
        """A diagnosis and at most one general lesson from a failed attempt.

        A reply that is not the JSON asked for is kept whole as the diagnosis."""
        prompt = prompts.render(
            "reflect",
            task=task.prompt,
            trajectory=trajectory_text(attempt),
            answer=head(attempt.answer or "(no answer)", 2000),
            feedback=verdict.feedback,  # built from feedback-visible checks only
            lessons=[lesson.text for lesson in in_play],
        )
        draft = self._draft(prompt, task, REFLECTION_FORMAT)
        reflection = Reflection()
        if isinstance(draft, ModelError):
            reflection.failed = str(draft)
            return reflection
        failed = verdict.failed_visible  # a hidden check is never named, not even here
        new = functools.partial(
            self._lesson, task=task, trial=attempt.trial, episode_id=episode_id, failed=failed
        )
        diagnosis, lesson = draft.diagnosis.strip(), draft.lesson.strip()
        if len(diagnosis) >= MIN_TEXT:
            reflection.diagnosis = new(diagnosis, "diagnosis", [])
        if len(lesson) >= MIN_TEXT and normal(lesson) != normal(diagnosis):
            general = new(lesson, "failure", draft.tags)
            reflection.lessons.append(general)
            replaced = [in_play[n - 1] for n in draft.replaces if 1 <= n <= len(in_play)]
            if replaced:
                reflection.replaces[general.id] = replaced
        return reflection

    def insight(
        self,
        task: Task,
        failed: Attempt,
        failed_verdict: Verdict,
        passed: Attempt,
        episode_id: str = "",
    ) -> list[Lesson]:
        """At most one general lesson from an attempt that passed after one that failed."""
        prompt = prompts.render(
            "insight",
            task=task.prompt,
            failed=trajectory_text(failed, total=3000),
            feedback=failed_verdict.feedback,
            passed=trajectory_text(passed, total=3000),
            answer=head(passed.answer or "", 1500),
        )
        draft = self._draft(prompt, task, INSIGHT_FORMAT)
        if isinstance(draft, ModelError) or len(draft.lesson.strip()) < MIN_TEXT:
            return []  # a prose reply is no general lesson: nothing is stored
        return [
            self._lesson(
                draft.lesson.strip(), "insight", draft.tags, task, passed.trial, episode_id, []
            )
        ]

    def _draft(
        self, prompt: str, task: Task, response_format: dict[str, Any]
    ) -> _Draft | ModelError:
        """The model's reply: the JSON asked for, or else its prose as the diagnosis; or the
        endpoint's error when it gave none."""
        messages: list[Message] = [{"role": "user", "content": prompt}]
        try:
            response = self.model.chat(
                messages, response_format=response_format, max_tokens=SHORT_REPLY_TOKENS
            )
        except ModelError as exc:
            log.warning("reflection failed for %s: %s", task.id, exc)
            self.usage = self.usage + Usage(unmetered_calls=exc.unmetered_calls)
            return exc
        self.usage = self.usage + response.usage
        text = response.text.strip()
        try:
            return _parse(text)
        except (ValueError, ValidationError):
            log.info("reflection for %s was not the JSON asked for; kept as prose", task.id)
            return _Draft(diagnosis=head(text, 1500))

    def _lesson(
        self,
        text: str,
        kind: Literal["failure", "insight", "diagnosis"],
        tags: list[str],
        task: Task,
        trial: int,
        episode_id: str,
        failed: list[str],
    ) -> Lesson:
        return Lesson(
            id=uuid.uuid4().hex[:12],
            text=head(text, 1500),
            kind=kind,
            scope=LessonScope(family=task.family, task_id=task.id, tags=tags[:8]),
            source=LessonSource(
                episode_id=episode_id,
                task_id=task.id,
                trial=trial,
                model=self.model.name,
                failed_checks=failed,
            ),
        )


def normal(text: str) -> str:
    """The text as two that say the same compare: lower case, one space, no final stop."""
    return " ".join(text.lower().split()).rstrip(".")


def _parse(text: str) -> _Draft:
    found = first_json_object(text)
    if found is None:
        raise ValueError("no JSON object found")
    draft = _Draft.model_validate(found)
    if not (draft.diagnosis.strip() or draft.lesson.strip()):
        raise ValueError("neither a diagnosis nor a lesson")
    return draft
