"""The OpenAI-compatible client through the real openai SDK against the local fake server:
tool calls, usage and cost, bounded retries, timeouts, malformed replies and embeddings."""

from __future__ import annotations

import pytest

from mulligan.actor import Actor, tool
from mulligan.errors import ModelError
from mulligan.llm.hosts import stops_for
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.llm.streaming import read_whole
from mulligan.testing import FakeOpenAIServer, FakeReply


def client(server: FakeOpenAIServer, **kwargs: object) -> OpenAIChatModel:
    sleeps: list[float] = []
    model = OpenAIChatModel(
        "gpt-4o-mini",
        base_url=server.base_url,
        api_key="k",
        sleep=sleeps.append,
        **kwargs,  # type: ignore[arg-type]
    )
    model.sleeps = sleeps  # type: ignore[attr-defined]
    return model


def test_text_tool_calls_usage_and_cost() -> None:
    replies = [
        FakeReply(
            content=None,
            tool_calls=[{"id": "c1", "name": "add", "arguments": {"a": 1}}],
            usage=(1000, 10),
        ),
    ]
    with FakeOpenAIServer(replies) as server:
        response = client(server).chat([{"role": "user", "content": "hi"}], tools=[])
    assert response.text == ""
    assert response.tool_calls[0].id == "c1"
    assert response.tool_calls[0].arguments == '{"a": 1}'
    assert response.finish_reason == "tool_calls"
    assert response.usage.prompt_tokens == 1000 and response.usage.completion_tokens == 10
    assert response.usage.cost == pytest.approx((1000 * 0.15 + 10 * 0.60) / 1e6)


def test_retries_429_and_500_then_succeeds() -> None:
    replies = [
        FakeReply(status=429, error="slow down"),
        FakeReply(status=500),
        FakeReply(content="ok"),
    ]
    with FakeOpenAIServer(replies) as server:
        model = client(server, max_retries=3)
        response = model.chat([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 3
    assert response.text == "ok"
    assert len(model.sleeps) == 2  # type: ignore[attr-defined]


def test_gives_up_after_bounded_retries_with_what_the_endpoint_said() -> None:
    replies = [FakeReply(status=500, error="upstream exploded")] * 3
    with FakeOpenAIServer(replies) as server:
        with pytest.raises(ModelError) as caught:
            client(server, max_retries=2).chat([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 3
    assert caught.value.status == 500
    assert "upstream exploded" in str(caught.value)


def test_client_errors_are_not_retried() -> None:
    with FakeOpenAIServer([FakeReply(status=400, error="bad request: tools")]) as server:
        with pytest.raises(ModelError, match="HTTP 400"):
            client(server).chat([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 1


def test_timeouts_are_retried_then_raised() -> None:
    replies = [FakeReply(content="late", delay=1.0)] * 2
    with FakeOpenAIServer(replies) as server, pytest.raises(ModelError, match="timed out"):
        client(server, timeout=0.2, max_retries=1).chat([{"role": "user", "content": "hi"}])


def test_malformed_tool_arguments_reach_the_model_as_an_error() -> None:
    @tool
    def add(a: int, b: int) -> str:
        """Use to add."""
        return str(a + b)

    replies = [
        FakeReply(
            content=None, tool_calls=[{"id": "c1", "name": "add", "arguments": '{"a": 1, "b"'}]
        ),
        FakeReply(
            content=None, tool_calls=[{"id": "c2", "name": "add", "arguments": {"a": 1, "b": 2}}]
        ),
        FakeReply(content="3"),
    ]
    with FakeOpenAIServer(replies) as server:
        attempt = Actor(client(server)).run("t", "1+2?", [add])
        assert server.violations == []
        sent_back = server.requests[1]["messages"]
    assert attempt.answer == "3"
    assert attempt.steps[0].results[0].status == "error"
    assistant = [m for m in sent_back if m["role"] == "assistant"][0]
    assert assistant["content"] == ""  # never null


def test_broken_response_body_is_a_model_error() -> None:
    replies = [FakeReply(raw_body='{"choices": []}')] * 2
    with FakeOpenAIServer(replies) as server, pytest.raises(ModelError, match="no choices"):
        client(server, max_retries=1).chat([{"role": "user", "content": "hi"}])


def test_embeddings_and_model_list() -> None:
    with FakeOpenAIServer() as server:
        model = client(server)
        vectors = model.embed(["a", "b"])
        assert len(vectors) == 2 and vectors[0] != vectors[1]
        assert model.list_models() == ["fake-model"]


def test_a_self_hosted_endpoint_gets_every_stop_and_a_hosted_one_the_first_four() -> None:
    """OpenAI's API refuses more than four stops; llama.cpp and the other self-hosted servers
    take more, and a small model that imagines `Action Output:` after its action (no stop of
    the four fires) otherwise writes to its reply cap: 1,024 tokens, ~250 s a step on a CPU."""
    stops = [f"\nStop{i}:" for i in range(6)]
    with FakeOpenAIServer(replies=[FakeReply(content="ok")]) as server:
        client(server).chat([{"role": "user", "content": "hi"}], stop=stops)
        assert server.requests[0]["stop"] == stops  # 127.0.0.1
    assert stops_for("https://api.openai.com/v1", stops) == stops[:4]
    assert stops_for("https://example.org/v1", stops) == stops[:4]
    assert stops_for("http://192.168.1.9:8080/v1", stops) == stops
    assert stops_for("http://localhost:11434/v1", stops[:2]) == stops[:2]


def test_requests_carry_no_sdk_metadata_headers() -> None:
    """The SDK's `X-Stainless-*` headers describe this machine (OS, architecture, Python
    version) and the client's retry and timeout settings to every endpoint; some gateways
    refuse requests that carry them. None is sent, streamed or not; the key still is."""
    with FakeOpenAIServer([FakeReply(content="ok"), FakeReply(content="ok")]) as server:
        model = client(server)
        model.chat([{"role": "user", "content": "hi"}])
        model.chat([{"role": "user", "content": "hi"}], until=read_whole)
        assert [bool(body.get("stream")) for body in server.requests] == [False, True]
        sent = server.headers
    assert all(headers["authorization"] == "Bearer k" for headers in sent)
    assert [[name for name in headers if name.startswith("x-stainless")] for headers in sent] == [
        [],
        [],
    ]
