"""Checks and verdicts."""

from mulligan.evaluator.evaluate import Evaluator

__all__ = ["Evaluator"]
