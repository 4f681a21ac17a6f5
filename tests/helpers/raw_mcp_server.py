"""An MCP server (stdio) written by hand, for tools the SDK's own server would refuse to list.

`python tests/helpers/raw_mcp_server.py TOOLS.json`: answers `initialize`, `tools/list` with
the tools in the file as they are (names and input schemas unchecked) and `tools/call` with
the tool's name and its arguments, as text.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def answer(request: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    method, params = request["method"], request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": tools}
    if method == "tools/call":
        said = f"{params['name']} {json.dumps(params.get('arguments') or {}, sort_keys=True)}"
        return {"content": [{"type": "text", "text": said}], "isError": False}
    return {}


def main() -> None:
    tools = json.loads(Path(sys.argv[1]).read_text())
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request:  # a notification
            continue
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer(request, tools)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
