"""A tiny MCP server (stdio) for the tests: `python tests/mcp_server.py [--crash-on-call]`."""

from __future__ import annotations

import os
import sys

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as FastMCP
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP  # type: ignore[no-redef]

server = FastMCP("notes")
CRASH = "--crash-on-call" in sys.argv


@server.tool()
def lookup_word(word: str) -> str:
    """The definition of a word in the project's glossary."""
    if CRASH:
        os._exit(3)
    glossary = {"mulligan": "a second try, allowed as a courtesy"}
    if word not in glossary:
        raise ValueError(f"no such word: {word}")
    return glossary[word]


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    server.run()
