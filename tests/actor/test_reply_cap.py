"""Each model reply is capped (`max_reply_tokens`): a model that runs on is cut and told so.

Seen in the study on a 1.5B model through llama.cpp: a reply that never stopped held the
server for minutes, past the client's timeout, and every retry queued behind it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mulligan.actor import Actor, ActorSettings, BudgetSection, tool
from mulligan.cli import main
from mulligan.errors import ModelError
from mulligan.llm.base import ChatResponse
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.schema import ToolCall
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel, reply, tool_call

RUNAWAY = "Let me think about this. " * 400  # about 2,400 tokens


@tool
def add(a: int, b: int) -> str:
    """Use to add two integers."""
    return str(a + b)


def _run(model: ScriptedModel, protocol: str = "native", cap: int = 50) -> Any:
    settings = ActorSettings(protocol=protocol, budget=BudgetSection(max_reply_tokens=cap))  # type: ignore[arg-type]
    return Actor(model, settings).run("t1", "What is 2 + 3?", [add])


def test_every_call_asks_for_the_cap() -> None:
    with ScriptedModel([reply("", tool_call("add", a=2, b=3)), "5"]) as model:
        Actor(model).run("t1", "What is 2 + 3?", [add])
    assert [c.max_tokens for c in model.calls] == [BudgetSection().max_reply_tokens] * 2


def test_a_reply_cut_at_the_cap_is_not_taken_as_the_answer() -> None:
    with ScriptedModel([RUNAWAY, "5"]) as model:
        attempt = _run(model)
    assert [s.kind for s in attempt.steps] == ["format_error", "final"]
    assert attempt.steps[0].finish_reason == "length"
    assert "cut off at the 50-token reply limit" in attempt.steps[0].feedback
    assert attempt.answer == "5"
    # the model was told, in the messages of its next call
    assert "50-token reply limit" in json.dumps(model.calls[1].messages)


def test_a_cut_final_answer_in_the_text_protocol_is_not_the_answer() -> None:
    long_final = "Thought: I know it\nFinal Answer: " + "five " * 200
    with ScriptedModel([long_final, "Thought: done\nFinal Answer: 5"]) as model:
        attempt = _run(model, protocol="text")
    assert [s.kind for s in attempt.steps] == ["format_error", "final"]
    assert attempt.answer == "5"


def test_a_cut_reply_that_calls_a_tool_still_runs_it() -> None:
    with ScriptedModel([reply(RUNAWAY, tool_call("add", a=2, b=3)), "5"]) as model:
        attempt = _run(model)
    assert attempt.steps[0].kind == "act"
    assert attempt.steps[0].results[0].output == "5"


def test_a_call_cut_off_at_the_cap_is_answered_and_the_model_told_why() -> None:
    """Its arguments end mid-way: the model saw only "not valid JSON", and wrote it as long
    again."""
    cut = ChatResponse("", [ToolCall(id="c", name="add", arguments='{"a": 2, "b')], "length")
    with ScriptedModel([cut, "5"]) as model:
        attempt = _run(model)
    assert attempt.steps[0].kind == "act" and attempt.steps[0].results[0].status == "error"
    assert "cut off at the 50-token reply limit" in json.dumps(model.calls[1].messages)


def test_replies_under_the_cap_are_untouched() -> None:
    with ScriptedModel(["5"]) as model:
        attempt = _run(model, cap=2048)
    assert attempt.steps[0].kind == "final" and attempt.answer == "5"


def _refuse_max_tokens(body: dict[str, Any]) -> FakeReply:
    if "max_tokens" in body:  # as OpenAI's reasoning models answer
        return FakeReply(
            status=400,
            error="Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
        )
    return FakeReply(content=f"capped at {body.get('max_completion_tokens')}")


def test_an_endpoint_that_refuses_max_tokens_gets_max_completion_tokens() -> None:
    with FakeOpenAIServer(policy=_refuse_max_tokens) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, backoff=0.0)
        first = model.chat([{"role": "user", "content": "hi"}], max_tokens=64)
        second = model.chat([{"role": "user", "content": "again"}], max_tokens=64)
        sent = [("max_tokens" in r, r.get("max_completion_tokens")) for r in server.requests]
    assert first.text == second.text == "capped at 64"
    assert sent == [(True, None), (False, 64), (False, 64)]  # refused once, then remembered


def test_a_streamed_request_refused_for_max_tokens_streams_with_max_completion_tokens() -> None:
    """A step read until its action (streamed) takes the other cap as a whole reply does,
    and goes on streaming: the refusal named the cap, not the stream."""
    with FakeOpenAIServer(policy=_refuse_max_tokens) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, backoff=0.0, stream_until=True)
        answer = model.chat([{"role": "user", "content": "hi"}], max_tokens=64, until=lambda: bool)
        sent = [(r.get("stream"), r.get("max_completion_tokens")) for r in server.requests]
    assert answer.text.startswith("capped")
    assert sent == [(True, None), (True, 64)] and model.stream_until


def test_other_bad_requests_are_not_mistaken_for_the_cap() -> None:
    with FakeOpenAIServer([FakeReply(status=400, error="bad request: tools")]) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, backoff=0.0)
        with pytest.raises(ModelError, match="HTTP 400"):
            model.chat([{"role": "user", "content": "hi"}], max_tokens=64)
        assert len(server.requests) == 1 and model.reply_cap_field == "max_tokens"


def test_the_flag_and_a_task_budget_set_the_cap(tmp_path: Path) -> None:
    task = tmp_path / "t.yaml"
    task.write_text(
        "- id: own\n  prompt: What is 2 + 2?\n  checks: [{type: numeric, value: 4}]\n"
        "  budget: {max_reply_tokens: 300}\n"
        "- id: plain\n  prompt: What is 3 + 3?\n  checks: [{type: numeric, value: 6}]\n"
    )
    base = ["run", str(task), "--memory", str(tmp_path / "m"), "--embedding", "hash"]
    with FakeOpenAIServer(policy=lambda body: FakeReply(content="4")) as server:
        assert main([*base, "--base-url", server.base_url]) in (0, 1)
        by_task = {
            json.dumps(r["messages"]).count("3 + 3"): r["max_tokens"] for r in server.requests
        }
    assert by_task == {0: 300, 1: 2048}
    with FakeOpenAIServer(policy=lambda body: FakeReply(content="4")) as server:
        main([*base, "--base-url", server.base_url, "--max-reply-tokens", "99"])
        assert {r["max_tokens"] for r in server.requests} == {99}


def test_a_cap_below_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["attempt", "hi", "--max-reply-tokens", "0", "--base-url", "http://127.0.0.1:9"]) == 2
    )
    assert "--max-reply-tokens" in capsys.readouterr().err
