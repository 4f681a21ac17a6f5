"""Cases beside lessons: a passing attempt kept as a worked example (Memento's case bank,
Agent Workflow Memory's "keep what successful runs did").

A case is stored as a lesson of kind `case`: its text is the task's prompt (what retrieval
matches against another task's prompt) and `case` holds the submitted answer (the code, for
code tasks) and what the feedback-visible checks said. Nothing a hidden check holds: the
verdict's feedback is built from visible checks only, and an attempt with no visible check
makes no case (nothing the agent could see vouched for it).
"""

from __future__ import annotations

import uuid

from mulligan.schema import (
    Attempt,
    CaseRecord,
    Lesson,
    LessonScope,
    LessonSource,
    Task,
    Verdict,
    tells_nothing,
)
from mulligan.strategies.carry import carried_answer
from mulligan.text_cut import head

FEEDBACK_CHARS = 2000


def case_of(task: Task, attempt: Attempt, verdict: Verdict, episode_id: str) -> Lesson | None:
    """The case a passing attempt makes: only when its visible checks all passed."""
    if verdict.visible_passed is not True or tells_nothing(attempt, verdict):
        return None
    answer, _ = carried_answer(task, attempt.answer or "")
    return Lesson(
        id=uuid.uuid4().hex[:12],
        text=task.prompt,
        kind="case",
        scope=LessonScope(family=task.family, task_id=task.id),
        source=LessonSource(episode_id=episode_id, task_id=task.id, trial=attempt.trial),
        case=CaseRecord(answer=answer, feedback=head(verdict.feedback, FEEDBACK_CHARS)),
    )
