"""Checks and verdicts."""

from mulligan.evaluator.evaluate import Evaluator as Evaluator
