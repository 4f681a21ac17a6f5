"""Checks and verdicts."""

from mulligan.evaluator.evaluate import Evaluator, feedback_text

__all__ = ["Evaluator", "feedback_text"]
