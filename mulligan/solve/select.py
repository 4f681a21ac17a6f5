"""Selection among the repair pipeline's candidates, by what the checks said: the most checks
passed, then the most tests passed (as pytest counts them), then the fewest changed lines,
then the earliest."""

from __future__ import annotations

import re

from mulligan.schema import Attempt, Episode, Verdict

PASSED_TESTS = re.compile(r"(\d+) passed")


def changed_lines(diff: str) -> int:
    """Lines a unified diff removes or adds (its headers not counted)."""
    return sum(
        1
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))
    )


def rank(attempt: Attempt, verdict: Verdict) -> tuple[int, int, int, int]:
    """Sorts best first; tests passed: the largest `N passed` the checks' output reports."""
    checks = sum(c.passed for c in verdict.checks)
    tests = max((int(n) for n in PASSED_TESTS.findall(verdict.feedback)), default=0)
    return (-checks, -tests, changed_lines(attempt.changes), attempt.trial)


def selected(episode: Episode) -> Attempt | None:
    """The best attempt that passed every check with a change; None if none did."""
    passing = [(a, v) for a, v in zip(episode.attempts, episode.verdicts, strict=True) if v.passed]
    if not passing:
        return None
    return min(passing, key=lambda pair: rank(*pair))[0]
