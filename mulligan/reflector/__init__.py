"""Turns (task, attempt, verdict) into lessons."""

from mulligan.reflector.reflect import Reflection, Reflector

__all__ = ["Reflection", "Reflector"]
