"""How a lesson's standing follows from what happened when it was used."""

from __future__ import annotations

import time

from mulligan.run_config import ValidityRules
from mulligan.schema import Lesson, LessonStatus

__all__ = ["ValidityRules", "apply_outcome", "is_usable"]

ACTIVE: tuple[LessonStatus, ...] = ("candidate", "validated")


def apply_outcome(lesson: Lesson, passed: bool, rules: ValidityRules) -> LessonStatus | None:
    """Count one use of the lesson; returns the new status when it changed."""
    v = lesson.validity
    if passed:
        v.helped += 1
    else:
        v.hurt += 1
    before = v.status
    if v.status in ACTIVE:
        if v.hurt >= rules.refute_after and v.hurt > v.helped:
            v.status = "refuted"
        elif v.helped >= rules.validate_after and v.helped > v.hurt:
            v.status = "validated"
        elif v.status == "validated" and v.hurt >= v.helped:
            v.status = "candidate"
    return v.status if v.status != before else None


def is_usable(lesson: Lesson, now: float | None = None) -> bool:
    v = lesson.validity
    if v.status not in ACTIVE:
        return False
    return v.expires_at is None or v.expires_at > (now or time.time())
