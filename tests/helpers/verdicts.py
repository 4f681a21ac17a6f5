"""Verdicts the tests build by hand."""

from __future__ import annotations

from mulligan.schema import CheckResult, Verdict


def seen(passed: bool) -> Verdict:
    """A verdict with one feedback-visible check: the evidence the counters count on."""
    check = CheckResult(type="exact_match", name="answer", passed=passed, score=float(passed))
    return Verdict(passed=passed, score=float(passed), checks=[check])
