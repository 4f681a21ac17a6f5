"""Turns (task, attempt, verdict) into lessons."""

from mulligan.reflector.reflect import Reflector

__all__ = ["Reflector"]
