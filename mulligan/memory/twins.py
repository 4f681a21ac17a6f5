"""Faithfulness twins: the memory arm with what it retrieved emptied, shuffled or corrupted,
so a study can tell whether the actor uses what it is shown or only that something is shown
("LLM Agents Are Not Always Faithful Self-Evolvers").

- `empty`: every item keeps its place, its content removed (a lesson reads "(empty)"; a
  case's prompt, answer and feedback too).
- `shuffled`: every item is replaced by one of the same kind from another family (the same
  family's items not retrieved for this task when the store holds no other family), drawn
  with a seed from the task's id; an item with no stand-in is left out.
- `corrupted`: every lesson is turned against itself by a fixed rewrite of each sentence
  (`negate`); cases are shown as they are (a worked example holds no rule to turn).
"""

from __future__ import annotations

import random
import re

from mulligan.memory.validity import ACTIVE
from mulligan.schema import CaseRecord, Lesson, Task

TWINS = ("empty", "shuffled", "corrupted")
EMPTY = "(empty)"
SENTENCE = re.compile(r"(?<=[.!?])\s+")
FLIPS = (
    (re.compile(r"^(?:do not|don't|never)\s+", re.IGNORECASE), ""),
    (re.compile(r"^always\s+", re.IGNORECASE), "Never "),
    (re.compile(r"^avoid\s+", re.IGNORECASE), "Prefer "),
)


def negate(text: str) -> str:
    """Each sentence turned against itself: a leading "Do not", "Don't" or "Never" is
    dropped, "Always" becomes "Never", "Avoid" becomes "Prefer"; any other sentence is
    prefixed with "Do not" (its first letter lowered): "Check the empty list first." ->
    "Do not check the empty list first." """
    turned = []
    for sentence in SENTENCE.split(text.strip()):
        for pattern, replacement in FLIPS:
            if pattern.match(sentence):
                rest = pattern.sub(replacement, sentence, count=1)
                turned.append(rest[:1].upper() + rest[1:])
                break
        else:
            turned.append(f"Do not {sentence[:1].lower()}{sentence[1:]}" if sentence else "")
    return " ".join(turned)


def disguise(lessons: list[Lesson], twin: str | None, own: set[str]) -> list[Lesson]:
    """Copies of the stored items as the twin shows them (`own`: the episode's reflections,
    which every twin leaves as they are)."""
    if twin not in ("empty", "corrupted"):
        return lessons
    shown = []
    for lesson in lessons:
        if lesson.id in own or (twin == "corrupted" and lesson.kind == "case"):
            shown.append(lesson)
        elif twin == "empty":
            case = CaseRecord(answer=EMPTY, feedback=EMPTY) if lesson.case else None
            shown.append(lesson.model_copy(update={"text": EMPTY, "case": case}))
        else:
            shown.append(lesson.model_copy(update={"text": negate(lesson.text)}))
    return shown


def stand_ins(
    stored: list[Lesson], task: Task, found: list[tuple[Lesson, float]]
) -> list[tuple[Lesson, float]]:
    """For each item found, one of the same kind from another family (see the module)."""
    rng = random.Random(f"shuffled:{task.id}")
    taken = {lesson.id for lesson, _ in found}
    usable = [x for x in stored if x.validity.status in ACTIVE and x.id not in taken]
    swapped = []
    for lesson, score in found:
        others = [x for x in usable if x.kind == lesson.kind]
        pool = [x for x in others if x.scope.family != task.family] or others
        if pool:
            pick = rng.choice(pool)
            usable.remove(pick)
            swapped.append((pick, score))
    return swapped
