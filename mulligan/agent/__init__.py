"""A persistent agent: in Python (`Agent`), and the memory as a service to other agents
over MCP (`memory_service.py`, `mcp_server.py`)."""

from mulligan.agent.agent import Agent

__all__ = ["Agent"]
