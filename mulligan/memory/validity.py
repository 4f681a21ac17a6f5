"""How a lesson's standing follows from what happened when it was used.

Only verification moves a lesson's status (`apply_evidence` for each pair, then `settle`
once over all of them): the same task with the lesson and without it, paired, so a lesson is
credited with what it changed. The online counters
(`apply_outcome`) count what followed a lesson being shown; most tasks that pass with a
lesson pass without one too, so they decide nothing."""

from __future__ import annotations

import time
from dataclasses import dataclass
from math import comb

from mulligan.schema import Lesson, LessonStatus, LessonValidity
from mulligan.settings.run_config import ValiditySection

ACTIVE: tuple[LessonStatus, ...] = ("candidate", "validated")
VALIDATED: tuple[LessonStatus, ...] = ("validated",)
"""What reaches the actor by default: nothing is a rule until verified."""
GENERAL = ("failure", "insight")
"""The kinds of lesson meant for other tasks (a diagnosis is one attempt's, a case an example)."""


def apply_outcome(lesson: Lesson, passed: bool) -> list[str]:
    """Count one use of the lesson online (`helped`: the attempt that saw it passed its
    visible checks, `hurt`: it failed them). The status stays: no further event."""
    v = lesson.validity
    v.helped, v.hurt = v.helped + passed, v.hurt + (not passed)
    return []


def apply_evidence(lesson: Lesson, task_id: str, helped: bool, hurt: bool) -> None:
    """Add one verified pair to the lesson's evidence; `settle` then decides its status."""
    e = lesson.validity.evidence
    e.pairs, e.helped, e.hurt = e.pairs + 1, e.helped + helped, e.hurt + hurt
    e.tasks = [*e.tasks, task_id]


def settle(lesson: Lesson, rules: ValiditySection) -> LessonStatus | None:
    """The status all of a lesson's pairs give it, whatever their order; returns it when it
    changed. A candidate is validated when it helped in more pairs than it hurt in, refuted
    when it hurt in more; a validated lesson that no longer helped more than it hurt is a
    candidate again. A refuted lesson stays refuted."""
    v, e = lesson.validity, lesson.validity.evidence
    before = v.status
    if v.status in ACTIVE:
        v.status = status_of(e.helped, e.hurt, rules)
    return v.status if v.status != before else None


def status_of(helped: int, hurt: int, rules: ValiditySection) -> LessonStatus:
    """The status a candidate's evidence gives it (`settle`'s rule, on counts alone)."""
    if hurt >= rules.refute_after and hurt > helped:
        return "refuted"
    if helped >= rules.validate_after and helped > hurt:
        return "validated"
    return "candidate"


@dataclass(frozen=True)
class Luck:
    """How a lesson fares in verification by the sampling noise of its pairs: its chance
    of being validated, and of being refuted."""

    pairs: int
    pass_rate: float
    """How often an attempt without any lesson passed its visible checks."""
    with_rate: float
    """How often an attempt with the lesson passes (the same: a lesson that changes nothing)."""
    validated: float
    refuted: float


def by_chance(
    pairs: int, pass_rate: float, rules: ValiditySection, with_rate: float | None = None
) -> Luck:
    """Exact chances over `pairs` pairs, each task passing with probability `pass_rate`
    without the lesson and `with_rate` with it (default: the same, a lesson that changes
    nothing). A pair helps with probability with(1 - without), hurts with without(1 - with)."""
    shown = pass_rate if with_rate is None else with_rate
    _possible(pairs, pass_rate, shown)
    helps, hurts = shown * (1 - pass_rate), pass_rate * (1 - shown)
    chances = {"validated": 0.0, "refuted": 0.0, "candidate": 0.0}
    for helped in range(pairs + 1):
        for hurt in range(pairs + 1 - helped):
            ways = comb(pairs, helped) * comb(pairs - helped, hurt)
            same = (1 - helps - hurts) ** (pairs - helped - hurt)
            chances[status_of(helped, hurt, rules)] += ways * helps**helped * hurts**hurt * same
    return Luck(pairs, pass_rate, shown, chances["validated"], chances["refuted"])


def by_chance_while_working(pairs: int, pass_rate: float, rules: ValiditySection) -> Luck:
    """`by_chance` for verification while working, which settles the lesson after each pair
    (memory/assignment.py): the chance that a lesson is validated, or refuted, by the time
    it has had `pairs` pairs, each pair's halves independent draws as in `by_chance`. A
    status reached stops the count: a validated lesson is shown to every attempt and makes
    no more pairs, a refuted one none. The lesson changes nothing: shown, an attempt passes
    as often as without it."""
    _possible(pairs, pass_rate)
    helps = hurts = pass_rate * (1 - pass_rate)
    open_counts, settled = {(0, 0): 1.0}, {"validated": 0.0, "refuted": 0.0}
    for _ in range(pairs):
        after: dict[tuple[int, int], float] = {}
        for (helped, hurt), chance in open_counts.items():
            for step, weight in (((1, 0), helps), ((0, 1), hurts), ((0, 0), 1 - helps - hurts)):
                key = (helped + step[0], hurt + step[1])
                after[key] = after.get(key, 0.0) + chance * weight
        open_counts = {}
        for counts, chance in after.items():
            status = status_of(*counts, rules)
            if status == "candidate":
                open_counts[counts] = chance
            else:
                settled[status] += chance
    return Luck(pairs, pass_rate, pass_rate, settled["validated"], settled["refuted"])


def _possible(pairs: int, *rates: float) -> None:
    """A count of pairs and pass rates chances can be computed for (else a bug: raises)."""
    if pairs < 0:
        raise ValueError(f"{pairs} pairs: a count of pairs is 0 or more")
    for rate in rates:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"a pass rate of {rate}: a rate is between 0 and 1")


def is_usable(
    lesson: Lesson, now: float | None = None, statuses: tuple[LessonStatus, ...] = ACTIVE
) -> bool:
    v = lesson.validity
    return v.status in statuses and (v.expires_at is None or v.expires_at > (now or time.time()))


def online_phrase(v: LessonValidity) -> str:
    """The online counters, named for what they count."""
    return f"shown {v.retrieved} (then passed {v.helped}, then failed {v.hurt})"


def evidence_phrase(v: LessonValidity) -> str:
    """What verification found: the pairs, and what they showed."""
    e = v.evidence
    if not e.pairs:
        return "not verified"
    where = f" (on {', '.join(e.tasks)})" if e.tasks else ""
    return f"verified on {e.pairs} pairs: helped {e.helped}, hurt {e.hurt}{where}"
