"""mulligan: Reflexion-style agents. `from mulligan import Agent` is the persistent agent
(mulligan/agent/); it is imported when first named, so `import mulligan` and the command
line's `--help` stay light."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mulligan.agent import Agent

__all__ = ["Agent"]


def __getattr__(name: str) -> Any:
    if name == "Agent":
        from mulligan.agent import Agent

        return Agent
    raise AttributeError(f"module 'mulligan' has no attribute {name!r}")
