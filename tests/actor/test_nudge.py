"""An answer before any tool call is sent back once, asking for the tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mulligan.actor import Actor, ActorSettings, tool
from mulligan.cli import main
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel, reply, tool_call
from tests.solve.test_solve import BUGGY, FIXED, call, make_project, solve_args

PROSE = "The bug is in calc.py:\n```python\ndef add(a, b):\n    return a + b\n```"


@tool
def add(a: int, b: int) -> str:
    """Use to add two integers."""
    return str(a + b)


def nudges(messages: list[dict[str, Any]]) -> int:
    return sum("made no tool call" in str(m.get("content")) for m in messages)


@pytest.mark.parametrize("protocol", ["native", "text"])
def test_an_answer_without_tools_is_sent_back_once(protocol: str) -> None:
    answer = PROSE if protocol == "native" else f"Thought: easy\nFinal Answer: {PROSE}"
    with ScriptedModel([answer, answer]) as model:
        actor = Actor(model, ActorSettings(protocol=protocol, nudge_no_tools=True))  # type: ignore[arg-type]
        attempt = actor.run("t1", "Fix calc.py", [add])
    assert [s.kind for s in attempt.steps] == ["act", "final"]
    assert attempt.stop_reason == "answered" and "return a + b" in (attempt.answer or "")
    second = model.calls[1].messages
    assert nudges(second) == 1 and "add" in str(second[-1]["content"])
    assert second[-2]["role"] == "assistant" and PROSE in second[-2]["content"]  # what it said


def test_no_nudge_after_a_tool_call_or_when_off() -> None:
    with ScriptedModel([reply("", tool_call("add", a=2, b=3)), "5"]) as model:
        attempt = Actor(model, ActorSettings(nudge_no_tools=True)).run("t", "2+3?", [add])
    assert attempt.answer == "5" and nudges(model.calls[-1].messages) == 0
    with ScriptedModel(["5"]) as model:
        attempt = Actor(model, ActorSettings()).run("t", "2+3?", [add])
    assert attempt.answer == "5" and len(model.calls) == 1
    with ScriptedModel(["5"]) as model:  # no tools to use: nothing to ask for
        attempt = Actor(model, ActorSettings(nudge_no_tools=True)).run("t", "2+3?", [])
    assert attempt.answer == "5" and len(model.calls) == 1


def test_solve_nudges_a_prose_answer_and_the_model_then_acts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    bodies: list[dict[str, Any]] = []

    def policy(body: dict[str, Any]) -> FakeReply:
        bodies.append(body)
        messages = body["messages"]
        if nudges(messages) == 0:
            return FakeReply(content=PROSE)
        if messages[-1]["role"] != "tool":
            return FakeReply(
                content=None, tool_calls=[call("write_file", path="calc.py", content=FIXED)]
            )
        return FakeReply(content="Fixed add() in calc.py.")

    with FakeOpenAIServer(policy=policy) as server:
        code = main(solve_args(server, project, tmp_path / "mem", "--trials", "1"))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert [nudges(b["messages"]) for b in bodies] == [0, 1, 1]
    assert "+    return a + b" in captured.out
    assert (project / "calc.py").read_text() == BUGGY


@pytest.mark.parametrize(
    ("base_url", "protocol"),
    [
        (None, "native"),
        ("https://api.openai.com/v1", "native"),
        ("https://dashscope.aliyuncs.com/compatible-mode/v1", "native"),
        ("http://127.0.0.1:8011/v1", "text"),
        ("http://localhost:11434/v1", "text"),
        ("http://192.168.1.20:1234/v1", "text"),
        ("http://[::1]:8000/v1", "text"),
    ],
)
def test_solve_speaks_text_to_a_self_hosted_endpoint_unless_told(
    base_url: str | None, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mulligan.cli.solve import solve_protocol
    from mulligan.settings.loading import load_config

    monkeypatch.delenv("MULLIGAN_PROTOCOL", raising=False)
    assert solve_protocol(load_config({"base_url": base_url})) == protocol
    told = load_config({"base_url": base_url, "protocol": "native"})
    assert solve_protocol(told) == "native"
    monkeypatch.setenv("MULLIGAN_PROTOCOL", "native")
    assert solve_protocol(load_config({"base_url": base_url})) == "native"


def test_solve_on_a_loopback_endpoint_runs_the_text_protocol(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MULLIGAN_PROTOCOL", raising=False)
    project = make_project(tmp_path / "calc")
    fix = json.dumps({"path": "calc.py", "content": FIXED})

    def policy(body: dict[str, Any]) -> FakeReply:
        if body["messages"][-1]["content"].startswith("Observation:"):
            return FakeReply(content="Thought: fixed\nFinal Answer: add() adds now.")
        return FakeReply(content=f"Thought: fix it\nAction: write_file\nAction Input: {fix}")

    with FakeOpenAIServer(policy=policy) as server:
        argv = solve_args(server, project, tmp_path / "mem", "--trials", "1")
        code = main([a for a in argv if a not in ("--protocol", "native")])
        first = server.requests[0]
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "tools" not in first and "Action Input" in first["messages"][0]["content"]
    assert "protocol text" in captured.err and "+    return a + b" in captured.out
