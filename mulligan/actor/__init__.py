"""The ReAct actor: loop, tools, budgets, context compression, text protocol."""

from mulligan.actor.budget import BudgetSection
from mulligan.actor.builtin_tools import build_tools
from mulligan.actor.context import CompressionSection
from mulligan.actor.react import Actor, ActorSettings
from mulligan.actor.tools import Tool, ToolRegistry, tool

__all__ = [
    "Actor",
    "ActorSettings",
    "BudgetSection",
    "CompressionSection",
    "Tool",
    "ToolRegistry",
    "build_tools",
    "tool",
]
