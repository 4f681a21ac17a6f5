"""What reflexion hands the next attempt, and what the reflector may keep.

`full` carry-over follows Reflexion (Shinn et al. 2023): the next attempt sees its previous
final answer (the code, for code tasks), what the feedback-visible checks said, and the
reflections of the episode, all as quoted data. `lessons` gives the reflections only.
"""

from __future__ import annotations

from mulligan import prompts
from mulligan.defaults import Carry
from mulligan.evaluator.code import last_code_block
from mulligan.reflector.reflect import normal
from mulligan.schema import CaseRecord, Episode, Lesson, PythonTestsCheck, Task
from mulligan.text_cut import head

ANSWER_CHARS = 4000


def carried_answer(task: Task, answer: str) -> tuple[str, bool]:
    """The previous answer as the next attempt should see it, and whether it is code."""
    code = task.code_target() is not None or any(
        isinstance(c, PythonTestsCheck) and not c.file and c.visibility == "feedback"
        for c in task.checks
    )  # a hidden check alone never changes what the next attempt sees
    if code and answer.strip():
        return head(last_code_block(answer).strip("\n"), ANSWER_CHARS), True
    return head(answer or "(no answer)", ANSWER_CHARS), False


UNVERIFIED = "(unverified) "
"""Marks a stored lesson shown before verification validated it (`show_candidates`)."""


def case_block(task: Task, case: Lesson) -> str:
    """A case as the actor sees it (prompts/case.md): a worked example, quoted as data."""
    body = case.case or CaseRecord(answer="")
    _, code = carried_answer(task, body.answer)
    return prompts.render(
        "case", prompt=case.text, answer=body.answer, code=code, feedback=body.feedback
    )


def carry_over(
    task: Task, episode: Episode, lessons: list[Lesson], carry: Carry
) -> tuple[list[str], str]:
    """(texts for the lessons block, the block pinned before it) for the next attempt.

    Cases come first in the pinned block, as worked examples. With `full`, this episode's own
    reflections go there too, next to the previous answer and feedback they explain; lessons
    from the store stay in the lessons block, a candidate's marked as unverified.
    """
    own = set(episode.lessons_written)
    examples = "\n\n".join(case_block(task, x) for x in lessons if x.kind == "case")
    lessons = [lesson for lesson in lessons if lesson.kind != "case"]
    texts = [
        UNVERIFIED + x.text if x.id not in own and x.validity.status == "candidate" else x.text
        for x in lessons
    ]
    if carry == "lessons" or not episode.attempts:
        return texts, examples
    reflections = [lesson.text for lesson in lessons if lesson.id in own]
    others = [text for x, text in zip(lessons, texts, strict=True) if x.id not in own]
    answer, code = carried_answer(task, episode.attempts[-1].answer or "")
    block = prompts.render(
        "carry",
        answer=answer,
        code=code,
        feedback=episode.verdicts[-1].feedback,  # built from feedback-visible checks only
        reflections=reflections,
    )
    return others, "\n\n".join(part for part in (examples, block) if part)


def unseen(written: list[Lesson], earlier: list[Lesson]) -> list[Lesson]:
    """The new texts only: a text this episode already wrote is never kept twice."""
    seen = {normal(lesson.text) for lesson in earlier}
    fresh = []
    for lesson in written:
        if normal(lesson.text) not in seen:
            seen.add(normal(lesson.text))
            fresh.append(lesson)
    return fresh
