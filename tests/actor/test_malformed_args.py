"""Malformed tool-call arguments stay out of the history sent back: the model's broken text gets
an error observation and stays in the step.

The model's broken text gets an error observation and stays in the Step record; the
assistant turn sent back carries valid JSON, so a strict server does not refuse the request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mulligan.actor import Actor, tool
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.testing import FakeOpenAIServer, FakeReply


@tool
def add(a: int, b: int) -> str:
    """Use to add two integers."""
    return str(a + b)


def strict_json(text: str) -> Any:
    """JSON as a strict server reads it: no NaN or Infinity either."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def sent_arguments(server: FakeOpenAIServer) -> list[str]:
    return [
        call["function"]["arguments"]
        for body in server.requests
        for message in body["messages"]
        for call in message.get("tool_calls") or []
    ]


BROKEN = [
    '{"a": 2, "b": 3',  # cut off
    "a=2, b=3",  # not JSON at all
    "",  # empty
    '{"a": NaN, "b": 3}',  # Python reads it, JSON does not
    "{'a': 2, 'b': 3}",  # Python's quotes
]


@pytest.mark.parametrize("broken", BROKEN)
def test_broken_arguments_are_not_sent_back_but_kept_in_the_log(broken: str) -> None:
    replies = [
        FakeReply(content=None, tool_calls=[{"id": "c1", "name": "add", "arguments": broken}]),
        FakeReply(content=None, tool_calls=[{"id": "c2", "name": "add", "arguments": {"a": 2}}]),
        FakeReply(content="5"),
    ]
    with FakeOpenAIServer(replies) as server:
        model = OpenAIChatModel("fake", base_url=server.base_url, api_key="k")
        attempt = Actor(model).run("t", "What is 2 + 3?", [add])
        sent = sent_arguments(server)
    assert attempt.stop_reason == "answered"
    assert attempt.steps[0].tool_calls[0].arguments == broken  # the log keeps the raw text
    first = attempt.steps[0].results[0]
    if broken == "":
        assert first.status == "error" and "field required" in first.output.lower()
    else:
        assert first.status == "error" and "not valid JSON" in first.output
    assert len(sent) == 3  # c1 in requests 2 and 3, c2 in request 3
    for arguments in sent:
        strict_json(arguments)
    assert server.violations == []


def test_valid_arguments_go_back_as_the_model_wrote_them() -> None:
    written = '{"a":2,"b":3}'
    replies = [
        FakeReply(content=None, tool_calls=[{"id": "c1", "name": "add", "arguments": written}]),
        FakeReply(content="5"),
    ]
    with FakeOpenAIServer(replies) as server:
        model = OpenAIChatModel("fake", base_url=server.base_url, api_key="k")
        Actor(model).run("t", "What is 2 + 3?", [add])
        assert sent_arguments(server) == [written]


def test_the_error_observation_shows_what_the_model_wrote() -> None:
    """The history shows `{}` in place of the broken text, so the observation quotes it."""
    replies = [
        FakeReply(content=None, tool_calls=[{"id": "c1", "name": "add", "arguments": "a=2, b=3"}]),
        FakeReply(content="5"),
    ]
    with FakeOpenAIServer(replies) as server:
        model = OpenAIChatModel("fake", base_url=server.base_url, api_key="k")
        Actor(model).run("t", "What is 2 + 3?", [add])
        observed = server.requests[1]["messages"][-1]
    assert observed["role"] == "tool" and "a=2, b=3" in observed["content"]
