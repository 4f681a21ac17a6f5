"""Verification: nothing is a rule until it changed an outcome.

Each candidate lesson (with `memory verify`, each validated one too, checked again) is tried
on up to `pairs` tasks it is retrieved for (tasks other than
the one it was written on, in the order given), one pair per task: one attempt with the
lesson shown (alone, as a validated lesson would be) and one without any (the same model
and sampling settings, made once per task and shared by every lesson tried there). A pair
helped when only the attempt with the lesson passed its feedback-visible checks, hurt when
only the one without did; the hidden checks decide nothing. The evidence goes into the
lesson's validity, one `verified` event per pair; once its pairs are all counted, its status
follows from them whatever their order (memory/validity.py `settle`: validated when it
helped in more pairs than it hurt in, refuted when it hurt in more).

The attempts are episodes of a run of their own (`RUN_ID-verify`) in the same log, so they
resume as any run does and a resumed verification counts no pair twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mulligan import strategies
from mulligan.loop import Loop
from mulligan.memory import Memory
from mulligan.memory.log import EpisodeLog
from mulligan.memory.memory import told
from mulligan.memory.validity import (
    GENERAL,
    Luck,
    ValiditySection,
    apply_evidence,
    by_chance,
    settle,
)
from mulligan.runs.runner import run_tasks
from mulligan.schema import Episode, Lesson, LessonStatus, Task

WITHOUT, WITH = strategies.VERIFY_WITHOUT, strategies.VERIFY_WITH

MakeLoop = Callable[[str], Loop]
"""A one-trial loop for a strategy, over the study's model, settings and memory."""


def verify_run_id(run_id: str) -> str:
    return f"{run_id}-verify"


@dataclass
class Verification:
    """What one verification found, lesson by lesson."""

    tried: dict[str, list[str]] = field(default_factory=dict)
    """Lesson id -> the tasks it was paired on."""
    changed: dict[str, str] = field(default_factory=dict)
    """Lesson id -> the status verification gave it."""
    without: tuple[int, int] = (0, 0)
    """Attempts without any lesson that passed their visible checks, of those that told."""


def retrieved_for(
    memory: Memory, lessons: list[Lesson], tasks: list[Task], k: int, floor: float, pairs: int
) -> dict[str, list[Task]]:
    """Per candidate, the tasks (up to `pairs`) whose top-k retrieval, unverified lessons
    included, holds it: not the task it was written on."""
    wanted = {lesson.id: lesson for lesson in lessons if lesson.kind in GENERAL}
    found: dict[str, list[Task]] = {i: [] for i in wanted}
    for task in tasks:
        ranked = memory.store.search(task.prompt, k, task.family, min_similarity=floor)
        for lesson, _ in ranked:
            chosen = found.get(lesson.id)
            own = chosen is None or task.id == wanted[lesson.id].source.task_id
            if chosen is not None and not own and len(chosen) < pairs:
                chosen.append(task)
    return {i: chosen for i, chosen in found.items() if chosen}


def verify(
    memory: Memory,
    lessons: list[Lesson],
    tasks: list[Task],
    make_loop: MakeLoop,
    run_id: str,
    *,
    k: int,
    min_similarity: float,
    pairs: int,
    concurrency: int = 1,
    statuses: tuple[LessonStatus, ...] = ("candidate",),
) -> Verification:
    """Pair every lesson of `lessons` in `statuses` (candidates; `memory verify` checks the
    validated ones again too) on the tasks it is retrieved for (see the module)."""
    candidates = [x for x in lessons if x.validity.status in statuses and x.kind in GENERAL]
    plan = retrieved_for(memory, candidates, tasks, k, min_similarity, pairs)
    result = Verification({i: [t.id for t in chosen] for i, chosen in plan.items()})
    if not plan:
        return result
    needed = list({t.id: t for chosen in plan.values() for t in chosen}.values())

    def run(make: Callable[[], Loop], chosen: list[Task], arm: str) -> list[Episode]:
        return run_tasks(
            make, chosen, run_id=run_id, strategy=arm, memory=memory, concurrency=concurrency
        )

    without = {e.task_id: e for e in run(lambda: make_loop(WITHOUT), needed, WITHOUT)}
    result.without = passed_without(without.values())
    by_id = {x.id: x for x in candidates}
    for lesson_id, chosen in plan.items():
        arm = f"with-{lesson_id}"
        shown = by_id[lesson_id].model_copy(deep=True)
        shown.validity.status = "validated"  # shown as it would be once verified: unmarked

        def loop(shown: Lesson = shown) -> Loop:
            made = make_loop(WITH)
            made.shown = lambda task: [shown]
            return made

        withs = run(loop, chosen, arm)
        for task, with_episode in zip(chosen, withs, strict=True):
            _count_pair(memory, by_id[lesson_id], task, with_episode, without[task.id])
        status = _settle(memory, by_id[lesson_id], withs[-1])
        if status:
            result.changed[lesson_id] = status
    return result


def _count_pair(
    memory: Memory, lesson: Lesson, task: Task, with_: Episode, without: Episode
) -> None:
    """One pair's evidence on the lesson; none when either attempt tells nothing."""
    passed = [_visible(e) for e in (with_, without)]
    if None in passed:
        return
    helped, hurt = passed[0] and not passed[1], passed[1] and not passed[0]

    def add(fresh: Lesson) -> list[str]:
        apply_evidence(fresh, task.id, bool(helped), bool(hurt))
        return []

    outcome = "helped" if helped else "hurt" if hurt else "same"
    detail = f"{task.id}: {outcome} (with {passed[0]}, without {passed[1]})"
    memory.change([lesson], "verified", add, episode_id=with_.id, trial=1, once=True,
                  details=[detail])  # fmt: skip


def _settle(memory: Memory, lesson: Lesson, last: Episode) -> str | None:
    """The status the lesson's pairs give it, decided once they are all counted (so their
    order does not matter); logged against its last pair's episode when it changed."""
    current = memory.lessons([lesson.id])[0].model_copy(deep=True)
    if settle(current, memory.rules) is None:
        return None
    changed: list[str] = []

    def decide(fresh: Lesson) -> list[str]:
        status = settle(fresh, memory.rules)
        changed.extend([status] if status else [])
        return []

    e = current.validity.evidence
    detail = f"{e.pairs} pair(s): helped {e.helped}, hurt {e.hurt}"
    memory.change([lesson], f"status:{current.validity.status}", decide,
                  episode_id=last.id, trial=1, details=[detail])  # fmt: skip
    return changed[-1] if changed else None


def passed_without(episodes: Iterable[Episode]) -> tuple[int, int]:
    """Of the attempts without a lesson that told something, how many passed."""
    told = [v for v in map(_visible, episodes) if v is not None]
    return sum(told), len(told)


def luck(
    lessons: Iterable[Lesson], without: tuple[int, int], rules: ValiditySection
) -> Luck | None:
    """What noise alone does to a lesson that changes nothing over as many pairs as any of
    `lessons` had, at the pass rate the attempts without a lesson had (None: no pair, or no
    attempt told anything)."""
    pairs = max((x.validity.evidence.pairs for x in lessons), default=0)
    passed, told = without
    return by_chance(pairs, passed / told, rules) if told and pairs else None


def logged_without(log: EpisodeLog, run_id: str) -> tuple[int, int]:
    """`passed_without` for a verification run in the log (`RUN_ID-verify`)."""
    rows = [e for e in log.episodes(run_id) if e["strategy"] == WITHOUT]
    return passed_without(e for e in map(log.episode, [r["id"] for r in rows]) if e)


def luck_line(found: Luck) -> str:
    return (
        f"A lesson that changes nothing, paired on {found.pairs} task(s) that passed "
        f"{found.pass_rate:.0%} of the time without a lesson, is validated by chance "
        f"{found.validated:.0%} of the time and refuted {found.refuted:.0%} under these "
        "rules (more pairs, --verify-pairs, or a higher validity.validate_after lower the first)."
    )


def _visible(episode: Episode) -> bool | None:
    return told(episode.attempts[0], episode.verdicts[0]) if episode.attempts else None
