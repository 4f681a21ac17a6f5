"""`ScriptedModel`: a chat model that plays back replies (or a policy function) and fails
on an unexpected call or, when closed, on leftover replies. Part of the product: tests,
benchmarks and `mulligan demo` drive the loop with it."""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mulligan.errors import DeadlineExceeded
from mulligan.llm.base import ChatResponse, Message, Until
from mulligan.llm.tokens import raw_estimate
from mulligan.schema import ToolCall, Usage


def tool_call(name: str, call_id: str | None = None, **arguments: Any) -> ToolCall:
    return ToolCall(
        id=call_id or f"call_{name}_{next_call_number()}",
        name=name,
        arguments=json.dumps(arguments),
    )


def reply(text: str = "", *calls: ToolCall) -> ChatResponse:
    return ChatResponse(
        text=text, tool_calls=list(calls), finish_reason="tool_calls" if calls else "stop"
    )


_numbers = itertools.count(1)


def next_call_number() -> int:
    return next(_numbers)  # one step of C code: no two threads get the same number


@dataclass
class ReceivedCall:
    messages: list[Message]
    tools: list[dict[str, Any]] | None
    stop: list[str] | None
    max_tokens: int | None
    timeout: float | None = None
    response_format: dict[str, Any] | None = None
    asked_temperature: float | None = None
    """The call's `temperature` (None: the model's own)."""


Reply = ChatResponse | str | BaseException
Policy = Callable[[list[Message], list[dict[str, Any]] | None], Reply]


class UnexpectedCall(AssertionError):
    pass


class ScriptedModel:
    """A ChatModel that plays back replies; usage is estimated when a reply has none."""

    def __init__(
        self,
        replies: Iterable[Reply | Policy] = (),
        *,
        name: str = "scripted",
        policy: Policy | None = None,
        delay: float = 0.0,
    ) -> None:
        self.name = name
        self.delay = delay
        """Seconds every reply takes; a call whose `timeout` is shorter is cut off there."""
        self.replies: list[Reply | Policy] = list(replies)
        self.policy = policy
        self.calls: list[ReceivedCall] = []
        self._lock = threading.Lock()

    def chat(
        self,
        messages: list[Message],
        *,
        tools: list[dict[str, Any]] | None = None,
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
        response_format: dict[str, Any] | None = None,
        until: Until | None = None,
        temperature: float | None = None,
    ) -> ChatResponse:
        """`until` is ignored: a scripted reply is given whole, as a non-streaming endpoint's."""
        with self._lock:
            self.calls.append(
                ReceivedCall(
                    copy.deepcopy(messages),
                    copy.deepcopy(tools),
                    stop,
                    max_tokens,
                    timeout,
                    response_format,
                    temperature,
                )
            )
            if self.replies:
                planned = self.replies.pop(0)
            elif self.policy is not None:
                planned = self.policy
            else:
                last = messages[-1].get("content") if messages else ""
                raise UnexpectedCall(
                    f"ScriptedModel {self.name!r}: unexpected call #{len(self.calls)}; "
                    f"last message: {str(last)[:300]!r}"
                )
        if self.delay:  # the reply is used up even when the caller stops waiting for it
            if timeout is not None and timeout < self.delay:
                time.sleep(max(timeout, 0.0))
                raise DeadlineExceeded(
                    f"ScriptedModel {self.name!r}: cut off after {timeout:.2f}s", unmetered_calls=1
                )
            time.sleep(self.delay)
        if callable(planned) and not isinstance(planned, (ChatResponse, str, BaseException)):
            planned = planned(messages, tools)
        if isinstance(planned, BaseException):
            raise planned
        response = (
            ChatResponse(text=planned) if isinstance(planned, str) else copy.deepcopy(planned)
        )
        if max_tokens and len(response.text) > 4 * max_tokens:  # as an endpoint cuts a reply
            response.text, response.finish_reason = response.text[: 4 * max_tokens], "length"
        if response.usage == Usage():
            response.usage = Usage(
                prompt_tokens=round(raw_estimate(messages, tools)),
                completion_tokens=max(1, round(len(response.text) / 4)),
            )
        return response

    def assert_done(self) -> None:
        if self.replies:
            raise AssertionError(
                f"ScriptedModel {self.name!r}: {len(self.replies)} scripted replies never used"
            )

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is None:
            self.assert_done()
