"""The report's section on the model's own tests (`--self-tests`): what the writing call
kept and dropped, and how often the tests agreed with the hidden ones."""

from __future__ import annotations

from collections import Counter

from mulligan.report.repeats import Table
from mulligan.report.stats import RunStats, logged_stop_rule
from mulligan.report.tables import pct


def self_test_note(stats: RunStats) -> str:
    """What the self-tests were, and what their two kinds of error did under the run's rule."""
    own_first = logged_stop_rule(stats.manifest).own_checks_first
    deciding = (
        "deciding whether to try again only on a task with no check of its own"
        if own_first
        else "deciding whether to try again"
    )
    alarm = (
        "on a task with no check of its own, a right answer is tried again"
        if own_first
        else "a right answer is tried again"
    )
    return (
        "Before trial 1 the model wrote asserts from the task prompt alone (`--self-tests`); the "
        f"kept ones were feedback-visible checks of every attempt, {deciding}; they never count "
        "in the score, which is the task's own checks. False pass: the self-tests all passed but "
        "the hidden tests failed. False alarm: the hidden tests passed but a self-test failed "
        f"({alarm})."
    )


def self_test_lines(stats: RunStats) -> list[str]:
    """What the writing call produced: kept and dropped tests, over the run's tasks."""
    if not stats.self_tests:
        return []
    kept, times = sum(len(t["tests"]) for t in stats.self_tests), len(stats.self_tests)
    dropped: Counter[str] = Counter()
    for written in stats.self_tests:
        dropped.update(written["dropped"])
    none = sum(1 for t in stats.self_tests if not t["tests"])
    why = ", ".join(f"{reason} {n}" for reason, n in sorted(dropped.items())) or "none"
    tasks = len({t["task_id"] for t in stats.self_tests})
    where = f"{tasks} tasks"
    if stats.repeats > 1:
        where += f", again in each of {stats.repeats} repeats ({times} in all)"
    return [
        f"Self-tests written for {where}: {kept} kept ({kept / times:.1f} a task), dropped: "
        f"{why}; tasks left without any: {none}."
    ]


def self_test_rows(stats: RunStats) -> Table:
    header = ["strategy", "attempts with self-tests", "false pass (hidden failed)"]
    header += ["false alarm (a self-test failed)"]
    rows = [
        [
            s.label,
            str(s.self_tested.attempts),
            pct(s.self_tested.false_passes, s.self_tested.self_passed),
            pct(s.self_tested.false_alarms, s.self_tested.hidden_passed),
        ]
        for s in stats.strategies
        if s.self_tested.attempts
    ]
    return header, rows
