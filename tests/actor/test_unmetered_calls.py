"""A call that times out after it was sent may have been served (and billed) with no usage
reported: the ledger counts such calls, so that totals are never silently short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mulligan.actor import Actor
from mulligan.cli import display, main
from mulligan.errors import EndpointUnreachable, ModelError
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.testing import FakeOpenAIServer, FakeReply

SLOW = FakeReply(content="late", delay=1.0, usage=(500, 500))
FAST = FakeReply(content="4", usage=(10, 1))
TASK = "- id: sum\n  prompt: What is 2 + 2?\n  checks: [{type: numeric, value: 4}]\n"


def _model(server: FakeOpenAIServer, retries: int = 3) -> OpenAIChatModel:
    return OpenAIChatModel(
        "m", base_url=server.base_url, timeout=0.3, max_retries=retries, backoff=0.0
    )


def test_a_timed_out_try_is_counted_on_the_reply_that_follows() -> None:
    with FakeOpenAIServer([SLOW, FAST]) as server:
        response = _model(server).chat([{"role": "user", "content": "2 + 2?"}])
    assert response.text == "4"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (10, 1)
    assert response.usage.unmetered_calls == 1


def test_a_call_that_never_answers_says_how_many_tries_went_unmetered() -> None:
    with FakeOpenAIServer([SLOW] * 3) as server, pytest.raises(ModelError) as caught:
        _model(server, retries=2).chat([{"role": "user", "content": "2 + 2?"}])
    assert caught.value.unmetered_calls == 3


def test_an_unreachable_endpoint_is_not_unmetered() -> None:
    """Nothing was sent, so nothing can have been spent."""
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", max_retries=1, backoff=0.0)
    with pytest.raises(EndpointUnreachable) as caught:
        model.chat([{"role": "user", "content": "hi"}])
    assert caught.value.unmetered_calls == 0


def test_a_server_gone_after_a_try_that_timed_out_still_counts_that_try() -> None:
    hung_up = FakeReply(hang_up=True)
    with FakeOpenAIServer([SLOW, hung_up]) as server, pytest.raises(EndpointUnreachable) as caught:
        _model(server, retries=1).chat([{"role": "user", "content": "hi"}])
    assert caught.value.unmetered_calls == 1


def test_the_attempt_keeps_the_count_when_the_endpoint_gives_up() -> None:
    with FakeOpenAIServer([SLOW] * 2) as server:
        attempt = Actor(_model(server, retries=1)).run("t", "What is 2 + 2?", [])
    assert attempt.stop_reason == "model_error"
    assert attempt.usage.unmetered_calls == 2
    assert attempt.usage_by_role["actor"].unmetered_calls == 2
    assert "2 calls unmetered (timed out)" in display.trajectory(attempt)


def test_run_json_and_the_bench_report_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unwaited_retries: None
) -> None:
    (tmp_path / "t.yaml").write_text(TASK)
    common = ["--base-url", "", "--timeout", "0.3", "--embedding", "hash"]
    with FakeOpenAIServer([SLOW, FAST]) as server:
        common[1] = server.base_url
        argv = ["run", str(tmp_path / "t.yaml"), "--json", "--memory", str(tmp_path / "m")]
        assert main([*argv, *common]) == 0
    episode = json.loads(capsys.readouterr().out.strip())
    assert episode["usage"]["unmetered_calls"] == 1
    assert episode["attempts"][0]["usage"]["by_role"]["actor"]["unmetered_calls"] == 1

    with FakeOpenAIServer([SLOW, FAST]) as server:
        common[1] = server.base_url
        out = tmp_path / "bench"
        argv = ["bench", str(tmp_path / "t.yaml"), "--strategies", "react", "--out", str(out)]
        assert main([*argv, *common]) == 0
    report = (out / "report.md").read_text()
    assert "1 model call (react 1) timed out after being sent" in report
    assert "timed out after being sent" in (out / "report.html").read_text()


def test_a_report_without_lost_calls_says_nothing_of_them(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(TASK)
    with FakeOpenAIServer([FAST]) as server:
        out = tmp_path / "bench"
        argv = ["bench", str(tmp_path / "t.yaml"), "--strategies", "react", "--out", str(out)]
        assert main([*argv, "--base-url", server.base_url, "--embedding", "hash"]) == 0
    assert "timed out after being sent" not in (out / "report.md").read_text()
