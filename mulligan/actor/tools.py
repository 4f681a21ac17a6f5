"""Typed Python functions as tools: schema from the signature, description from the docstring."""

from __future__ import annotations

import concurrent.futures
import functools
import inspect
import json
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, get_type_hints

import pydantic

from mulligan.errors import field_problems
from mulligan.jsontext import UNREADABLE_JSON
from mulligan.schema import ToolCall, ToolResult, ToolStatus
from mulligan.text_cut import head, head_and_tail
from mulligan.untrusted import encodable, neutralise, neutralise_all

DEFAULT_TOOL_TIMEOUT = 60.0


@dataclass
class Tool:
    name: str
    description: str
    function: Callable[..., Any]
    arguments: type[pydantic.BaseModel]
    needs_approval: bool = False
    timeout: float = DEFAULT_TOOL_TIMEOUT
    changes_state: bool = False
    """It changes what other calls would see (writes a file): the actor lets calls made
    before it run again after it."""
    read_only: bool = False
    """It changes nothing another call could see (reads a file): a turn whose calls are all
    read-only runs them concurrently; any other turn runs its calls in the model's order."""
    _schema: tuple[tuple[str, str], dict[str, Any]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """`schema()` as made for a name and description (making it takes pydantic ~0.15 ms)."""

    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments (from the function's signature)."""
        parameters = self.arguments.model_json_schema()
        parameters.pop("title", None)
        for spec in parameters.get("properties", {}).values():
            spec.pop("title", None)
        return parameters

    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry for this tool (neutralised: an MCP server's text is
        untrusted, and the server renders it into the prompt). Made again only when the name
        or description changed: the arguments a tool takes are fixed when it is made."""
        made = (self.name, self.description)
        if self._schema is None or self._schema[0] != made:
            function = {"name": made[0], "description": made[1], "parameters": self.parameters()}
            self._schema = made, {"type": "function", "function": neutralise_all(function)}
        return self._schema[1]

    def signature_line(self) -> str:
        """A compact one-line description for the text protocol's system prompt."""
        params = self.parameters().get("properties", {})
        fields = ", ".join(
            f'"{name}": {spec.get("type", "any") if isinstance(spec, dict) else "any"}'
            for name, spec in params.items()
        )
        return neutralise(f"{self.name}: {self.description} Input: {{{fields}}}")


def tool(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    needs_approval: bool = False,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    changes_state: bool = False,
    read_only: bool = False,
) -> Any:
    """Turn a typed function into a Tool: `@tool` or `@tool(needs_approval=True)`."""

    def wrap(fn: Callable[..., Any]) -> Tool:
        hints = get_type_hints(fn)
        fields: dict[str, Any] = {}
        for param in inspect.signature(fn).parameters.values():
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (hints.get(param.name, Any), default)
        model = pydantic.create_model(  # type: ignore[call-overload]
            f"{fn.__name__}_arguments",
            __config__=pydantic.ConfigDict(extra="forbid"),
            **fields,
        )
        description = inspect.cleandoc(fn.__doc__ or "").strip() or fn.__name__
        return Tool(
            name=name or fn.__name__,
            description=description,
            function=fn,
            arguments=model,
            needs_approval=needs_approval,
            timeout=timeout,
            changes_state=changes_state,
            read_only=read_only,
        )

    return wrap(function) if function is not None else wrap


Approver = Callable[[ToolCall], bool]


class ToolThreads:
    """Threads that run tool functions under their timeouts, kept from one call to the next
    (starting a thread per call was the largest part of an actor step's own time). A thread
    whose call timed out is left to it, never given another call."""

    def __init__(self) -> None:
        self._idle: list[concurrent.futures.ThreadPoolExecutor] = []
        self._lock = threading.Lock()

    def call(self, function: Callable[..., Any], arguments: dict[str, Any], timeout: float) -> Any:
        with self._lock:
            pool = self._idle.pop() if self._idle else concurrent.futures.ThreadPoolExecutor(1)
        future = pool.submit(function, **arguments)
        try:
            future.exception(timeout=timeout)  # waits; the function's own error stays in it
        except concurrent.futures.TimeoutError:
            pool.shutdown(wait=False)  # not `with`: a timeout must not wait
            raise
        with self._lock:
            self._idle.append(pool)
        return future.result()


@dataclass
class ToolRegistry:
    tools: dict[str, Tool] = field(default_factory=dict)
    approve: Approver | None = None
    max_output_chars: int = 4000
    workers: int = 8
    threads: ToolThreads = field(default_factory=ToolThreads, compare=False, repr=False)

    @classmethod
    def of(cls, tools: Iterable[Tool], **kwargs: Any) -> ToolRegistry:
        return cls(tools={t.name: t for t in tools}, **kwargs)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

    def run_all(self, calls: list[ToolCall], deadline: float = math.inf) -> list[ToolResult]:
        """Run one turn's calls, exactly one result per call, in call order: concurrently when
        every call only reads, else one after another in the model's order (a model that
        writes a file and runs the tests in one turn means that order). None runs past
        `deadline` (`time.monotonic`'s: where the attempt's time runs out)."""
        chosen = [self.tools.get(call.name) for call in calls]
        run = functools.partial(self.run, deadline=deadline)
        if len(calls) <= 1 or not all(t is None or t.read_only for t in chosen):
            return [run(call) for call in calls]
        with concurrent.futures.ThreadPoolExecutor(min(self.workers, len(calls))) as pool:
            return list(pool.map(run, calls))

    def run(self, call: ToolCall, deadline: float = math.inf) -> ToolResult:
        started = time.perf_counter()
        status, output = self._execute(call, deadline)
        output = encodable(output)  # a long one: its head and tail, the cut marked
        output = head_and_tail(output, self.max_output_chars) if output.strip() else "(no output)"
        return ToolResult(
            call_id=call.id,
            name=call.name,
            status=status,
            output=output,
            seconds=time.perf_counter() - started,
        )

    def _execute(self, call: ToolCall, deadline: float) -> tuple[ToolStatus, str]:
        chosen = self.tools.get(call.name)
        if chosen is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return "error", f"Error: unknown tool {call.name!r}. Available tools: {known}."
        try:
            raw = strict_json(call.arguments or "{}")
        except UNREADABLE_JSON as exc:
            return "error", _not_json(call.arguments, exc)
        if not isinstance(raw, dict):
            raw = _single_argument(chosen, raw)
            if raw is None:
                return "error", "Error: arguments must be a JSON object of named parameters."
        try:
            arguments = chosen.arguments.model_validate(raw)
        except pydantic.ValidationError as exc:
            problems = "; ".join(field_problems(exc, "arguments"))
            return "error", f"Error: invalid arguments for {call.name}: {problems}"
        if chosen.needs_approval and not (self.approve and self.approve(call)):
            return "denied", f"Denied: {call.name} needs approval and it was not given."
        left = deadline - time.monotonic()
        ran_out = " (the attempt's time ran out)" if left < chosen.timeout else ""
        if left <= 0:
            return "timeout", f"Error: {call.name} was not run{ran_out}."
        try:
            value = self.threads.call(chosen.function, dict(arguments), min(chosen.timeout, left))
        except concurrent.futures.TimeoutError:
            limit = min(chosen.timeout, left)
            return "timeout", f"Error: {call.name} timed out after {limit:.3g}s{ran_out}."
        except Exception as exc:  # a tool's failure is an observation for the model
            return "error", f"Error: {type(exc).__name__}: {exc}"
        if isinstance(value, str):
            return "ok", value
        try:
            return "ok", json.dumps(value, default=str)
        except (TypeError, ValueError) as exc:  # tuple keys, a list that holds itself
            return "error", f"Error: {call.name} returned what JSON cannot hold: {exc}"


def strict_json(text: str) -> Any:
    """JSON as a strict server reads it: `NaN` and `Infinity` are not JSON either."""
    return json.loads(text, parse_constant=_not_a_constant)


def _not_a_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _not_json(written: str, exc: Exception) -> str:
    """The error observation; it quotes what the model wrote, since the history sent back
    carries `{}` in its place (mulligan.actor.context.sendable_arguments)."""
    where = f"{exc.msg} at char {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
    return (
        f"Error: arguments are not valid JSON ({where}); write one JSON object of named "
        f"parameters. You wrote: {head(written, 300)}"
    )


def _single_argument(chosen: Tool, value: Any) -> dict[str, Any] | None:
    """A bare value for a tool with exactly one parameter is that parameter."""
    names = list(chosen.arguments.model_fields)
    return {names[0]: value} if len(names) == 1 else None
