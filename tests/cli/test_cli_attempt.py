"""`mulligan attempt` and `mulligan doctor`: no endpoint is one line naming the fix (exit 2);
one attempt against the fake server, as text and as JSON, in both protocols; doctor reports
each part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.testing import FakeOpenAIServer, FakeReply


def test_no_endpoint_prints_the_fix_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["attempt", "What is 2+2?"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    for hint in (
        "--base-url",
        "OPENAI_BASE_URL",
        "--api-key",
        "OPENAI_API_KEY",
        "--model",
        "MULLIGAN_MODEL",
    ):
        assert hint in err[0]


def test_attempt_against_the_fake_server(capsys: pytest.CaptureFixture[str]) -> None:
    replies = [
        FakeReply(
            content=None, tool_calls=[{"name": "calculator", "arguments": {"expression": "31-28"}}]
        ),
        FakeReply(content="Beijing is hotter by 3 degrees."),
    ]
    with FakeOpenAIServer(replies) as server:
        code = main(["attempt", "Which is hotter?", "--base-url", server.base_url, "--model", "m"])
    out = capsys.readouterr().out
    assert code == 0
    assert "calculator" in out and "<- ok: 3" in out
    assert "answer: Beijing is hotter by 3 degrees." in out


def test_attempt_json_and_text_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    replies = [
        FakeReply(
            content='Thought: compute\nAction: calculator\nAction Input: {"expression": "6*7"}'
        ),
        FakeReply(content="Final Answer: 42"),
    ]
    with FakeOpenAIServer(replies) as server:
        code = main(
            ["attempt", "6*7?", "--base-url", server.base_url, "--protocol", "text", "--json"]
        )
        assert "stop" in server.requests[0] and "tools" not in server.requests[0]
    record = json.loads(capsys.readouterr().out)
    assert code == 0
    assert record["answer"] == "42" and record["model"] == "fake-model"
    assert record["steps"][0]["results"][0]["output"] == "42"


def test_doctor_reports_each_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_local_model: None
) -> None:
    with FakeOpenAIServer([FakeReply(content="ok")]) as server:
        code = main(
            [
                "doctor",
                "--base-url",
                server.base_url,
                "--memory",
                str(tmp_path),
                "--embedding",
                "hash",
            ]
        )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ok   endpoint" in out and "'ok'" in out and "ok   lesson store: 0 lessons" in out
    assert "ok   sandbox: 42" in out
    assert main(["doctor", "--memory", str(tmp_path), "--embedding", "hash"]) == 1
    assert "FAIL endpoint: none configured" in capsys.readouterr().out
