"""Tools from MCP servers (stdio), as synchronous Tools: the only module that imports `mcp`.

`MCPServers` starts each server once (a command line, optionally `NAME=COMMAND`), lists its
tools and offers them as `<server>_<tool>` with the server's JSON schema (numbered `_2`,
`_3`, ... where two names meet once made safe: `a.b` and `a_b`). The official SDK
is asynchronous: one background thread runs an event loop holding every session, and each
tool call is handed to it and waited for with a timeout. A tool's error, a timeout or a
server that died comes back as an error observation; closing stops every server.

A tool whose input schema is not a schema refuses its whole server (a UserError naming the
tool and the fault): an attempt offered a quiet subset of the tools asked for is another run.
So does a tool whose name would be a built-in tool's (server `read`, tool `file`: `read_file`),
which would replace the built-in; the error says to name the server otherwise.

The servers are the user's own programs: they run as the user, outside the box.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import os
import re
import shlex
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pydantic

from mulligan.actor.builtin_tools import BUILTIN_TOOLS
from mulligan.actor.tool_schemas import FIX_SCHEMA, schema_fault
from mulligan.actor.tools import Tool
from mulligan.errors import UserError
from mulligan.text_cut import last_lines

log = logging.getLogger("mulligan")

MISSING_SDK = 'MCP servers need the mcp package: pip install "mulligan[mcp]"'
NAME_SPEC = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)=(\S.*)$")
MAX_TOOL_NAME = 64
"""OpenAI's limit on a function name (which must also match ^[a-zA-Z0-9_-]+$)."""


class MCPToolError(Exception):
    """The server answered the call with an error, or could not answer it."""


class _AnyArguments(pydantic.BaseModel):
    """The server validates against its own schema; we pass the arguments through."""

    model_config = pydantic.ConfigDict(extra="allow")


@dataclass
class MCPTool(Tool):
    input_schema: dict[str, Any] = field(default_factory=dict)

    def parameters(self) -> dict[str, Any]:
        """The server's own JSON schema for the tool's arguments."""
        parameters = {k: v for k, v in self.input_schema.items() if k != "title"}
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        return parameters


def _sdk() -> Any:
    try:
        import mcp
        import mcp.client.stdio
    except ImportError as exc:
        raise UserError(MISSING_SDK) from exc
    return mcp


def safe_name(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_-]", "_", text).strip("_") or "server"


def distinct(name: str, taken: set[str], joiner: str = "_") -> str:
    """`name`, or `name` numbered (2, 3, ...) until no name in `taken` is the same."""
    candidate, n = name, 2
    while candidate in taken:
        suffix = f"{joiner}{n}"
        candidate, n = name[: MAX_TOOL_NAME - len(suffix)] + suffix, n + 1
    return candidate


@dataclass
class _Server:
    spec: str
    name: str
    argv: list[str]
    errlog: IO[str]
    session: Any = None
    stop: asyncio.Event | None = None
    task: asyncio.Task[None] | None = None
    gone: bool = False
    error: str = ""

    def said(self, lines: int = 5) -> str:
        """The end of its stderr, as a clause of an error ("" when it wrote none)."""
        try:
            text = Path(self.errlog.name).read_text(errors="replace")
        except OSError:
            return ""
        tail = " | ".join(last_lines(text, lines))
        return f"; its stderr: {tail}" if tail else ""

    def stopped(self) -> str:
        return f"MCP server {self.name!r} has stopped ({self.error or 'it exited'}){self.said()}"


def parse_spec(spec: str) -> tuple[str, list[str]]:
    """`NAME=COMMAND` or `COMMAND` -> (name or "", argv)."""
    named = NAME_SPEC.match(spec.strip())
    name, command = (named.group(1), named.group(2)) if named else ("", spec)
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UserError(f"--mcp {spec!r}: cannot read the command ({exc})") from exc
    if not argv:
        raise UserError("--mcp needs a command that starts a server, e.g. --mcp 'python srv.py'")
    return name, argv


class MCPServers:
    """MCP servers for one run: `with MCPServers(specs) as servers: servers.tools`."""

    def __init__(
        self, specs: list[str], *, call_timeout: float = 60.0, start_timeout: float = 30.0
    ) -> None:
        self.specs = list(dict.fromkeys(s.strip() for s in specs if s.strip()))
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout
        self.servers: list[_Server] = []
        self.tools: list[Tool] = []
        self.tools_of: dict[str, list[Tool]] = {}
        """Spec -> the tools of the server it started."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> MCPServers:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ life cycle

    def start(self) -> list[Tool]:
        if not self.specs:
            return []
        mcp = _sdk()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="mulligan-mcp", daemon=True
        )
        self._thread.start()
        try:
            for spec in self.specs:
                self._start_one(mcp, spec)
        except BaseException:
            self.close()
            raise
        return self.tools

    def _start_one(self, mcp: Any, spec: str) -> None:
        assert self._loop is not None
        name, argv = parse_spec(spec)
        errlog = tempfile.NamedTemporaryFile("w+", prefix="mulligan-mcp-", suffix=".log")  # noqa: SIM115
        server = _Server(spec, name, argv, errlog)
        self.servers.append(server)
        ready: concurrent.futures.Future[tuple[Any, list[Any]]] = concurrent.futures.Future()
        asyncio.run_coroutine_threadsafe(self._serve(mcp, server, ready), self._loop)
        try:
            info, listed = ready.result(timeout=self.start_timeout)
        except Exception as exc:
            if isinstance(exc, concurrent.futures.TimeoutError):
                why = f"the server did not answer within {self.start_timeout:g}s"
            elif refused := _refused_listing(exc):
                why = refused + FIX_SCHEMA
            else:
                why = f"the server did not start ({_describe(exc)})"
            raise UserError(f"--mcp {spec!r}: {why}{server.said()}") from None
        for listed_tool in listed:  # one bad tool refuses the server: never a quiet subset
            if fault := schema_fault(_input_schema(listed_tool)):
                what = f"tool {listed_tool.name!r} has an input schema that {fault}"
                raise UserError(f"--mcp {spec!r}: {what}{FIX_SCHEMA}")
        taken = {s.name for s in self.servers if s is not server}
        server.name = distinct(server.name or safe_name(_server_name(info, argv)), taken, "")
        tools: list[Tool] = []
        for listed_tool in listed:  # names that meet once made safe: each its own, numbered
            tools.append(self._tool(server, listed_tool, {t.name for t in self.tools + tools}))
        self.tools_of[spec] = tools
        self.tools += tools
        log.info("MCP server %s: %d tools", server.name, len(tools))

    async def _serve(
        self, mcp: Any, server: _Server, ready: concurrent.futures.Future[tuple[Any, list[Any]]]
    ) -> None:
        """Hold the server's session open until asked to stop, or until the server dies."""
        server.stop = asyncio.Event()
        server.task = asyncio.current_task()  # type: ignore[assignment]
        params = mcp.StdioServerParameters(
            command=server.argv[0], args=server.argv[1:], env=dict(os.environ)
        )
        try:
            async with mcp.client.stdio.stdio_client(params, errlog=server.errlog) as streams:  # noqa: SIM117
                async with mcp.ClientSession(streams[0], streams[1]) as session:
                    info = await session.initialize()
                    listed = await session.list_tools()
                    server.session = session
                    ready.set_result((info, list(listed.tools)))
                    await server.stop.wait()
        except BaseException as exc:  # noqa: BLE001 - a dead server is reported, never raised here
            server.error = _describe(exc)
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
        finally:
            server.gone = True

    def close(self) -> None:
        """Stop every server (a ready one is asked first, then cancelled) and the event loop."""
        loop = self._loop
        if loop is None:
            return
        for server in self.servers:  # one still starting has nothing to ask: cancelled
            stop = server.stop if server.session is not None else None
            if server.task is not None:
                loop.call_soon_threadsafe(stop.set if stop else server.task.cancel)
        for server in self.servers:
            if server.task is not None and not _wait(loop, server.task, 8):
                loop.call_soon_threadsafe(server.task.cancel)
                if not _wait(loop, server.task, 5):
                    log.warning("MCP server %s did not stop", server.name or server.spec)
            server.errlog.close()
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop = None

    # ------------------------------------------------------------ tools

    def _tool(self, server: _Server, listed: Any, taken: set[str]) -> MCPTool:
        safe = safe_name(f"{server.name}_{listed.name}")[:MAX_TOOL_NAME]
        if safe in BUILTIN_TOOLS:
            named = NAME_SPEC.match(server.spec)
            command = named.group(2) if named else server.spec
            raise UserError(
                f"--mcp {server.spec!r}: its tool {listed.name!r} would be offered as {safe}, the"
                f" name of a built-in tool; give the server another name: --mcp 'NAME={command}'"
            )
        name = distinct(safe, taken)
        if name != safe:
            log.warning(
                "tool %r of MCP server %r is offered as %s: %s is another tool's name",
                listed.name, server.name, name, safe,
            )  # fmt: skip
        description = (listed.description or listed.name).strip()
        return MCPTool(
            name=name,
            description=f"{description} (from the MCP server {server.name})",
            function=functools.partial(self.call, server, listed.name),
            arguments=_AnyArguments,
            timeout=self.call_timeout + 5,
            input_schema=dict(_input_schema(listed)),
        )

    def call(self, server: _Server, tool_name: str, /, **arguments: Any) -> str:
        """The tool's text; raises MCPToolError for a tool error, a timeout or a dead server."""
        if server.gone or self._loop is None:
            raise MCPToolError(server.stopped())
        future = asyncio.run_coroutine_threadsafe(
            server.session.call_tool(tool_name, arguments), self._loop
        )
        try:
            result = future.result(timeout=self.call_timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise MCPToolError(
                f"{tool_name} on MCP server {server.name!r} gave no answer in "
                f"{self.call_timeout:g}s"
            ) from None
        except Exception as exc:
            if server.gone or _connection_lost(exc):
                server.gone = True
                server.error = server.error or _describe(exc)
                raise MCPToolError(server.stopped()) from None
            raise MCPToolError(f"MCP server {server.name!r}: {_describe(exc)}") from None
        text = result_text(result)
        if getattr(result, "is_error", None) or getattr(result, "isError", False):
            raise MCPToolError(text)
        return text


def _input_schema(listed: Any) -> Any:
    return getattr(listed, "input_schema", None) or getattr(listed, "inputSchema", None) or {}


def _refused_listing(exc: BaseException) -> str:
    """The SDK's own refusal of the server's tool list, in one line ("" for other errors)."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if not isinstance(exc, pydantic.ValidationError) or "ListToolsResult" not in exc.title:
        return ""
    first = exc.errors()[0]
    position, *path = first["loc"][1:] or (0,)
    where = ".".join(str(p) for p in path if p != "bool" and "[" not in str(p))  # not a branch
    return (
        f"the MCP client refuses the server's tool list: at {where} of the tool listed"
        f" number {int(position) + 1}, {first['msg'].lower()} (given {first['input']!r})"
    )


def _wait(loop: asyncio.AbstractEventLoop, task: asyncio.Task[None], seconds: float) -> bool:
    """Whether the task (on `loop`) finished within `seconds`."""

    async def finished() -> bool:
        await asyncio.wait({task}, timeout=seconds)
        return task.done()

    try:
        return asyncio.run_coroutine_threadsafe(finished(), loop).result(timeout=seconds + 2)
    except (concurrent.futures.TimeoutError, RuntimeError):
        return False


def _server_name(info: Any, argv: list[str]) -> str:
    about = getattr(info, "server_info", None) or getattr(info, "serverInfo", None)
    name = getattr(about, "name", "") or ""
    if name:
        return str(name)
    script = next((a for a in reversed(argv) if not a.startswith("-")), argv[0])
    return Path(script).stem


def _connection_lost(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "connection closed" in text or "closed" in type(exc).__name__.lower()


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking inside exception groups."""
    inner = getattr(exc, "exceptions", None)
    if inner:
        return _describe(inner[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def result_text(result: Any) -> str:
    """A CallToolResult as text: its text blocks, other blocks named, or structured content."""
    parts = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(getattr(block, "resource", None), "text"):
            parts.append(block.resource.text)
        else:
            mime = getattr(block, "mime_type", None) or getattr(block, "mimeType", "")
            parts.append(f"[{kind or 'content'}{' ' + mime if mime else ''} not shown]")
    if not parts:
        for name in ("structured_content", "structuredContent"):
            if getattr(result, name, None) is not None:
                return json.dumps(getattr(result, name))
    return "\n".join(parts)
