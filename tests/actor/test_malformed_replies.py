"""A malformed reply is a ModelError: retried, then a clean model_error stop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mulligan.actor import Actor
from mulligan.errors import ModelError
from mulligan.llm.completion import MalformedReply, read_completion
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.llm.streaming import read_stream, read_whole
from mulligan.memory import Memory
from mulligan.testing import FakeOpenAIServer, FakeReply

ROOT = Path(__file__).resolve().parents[2]
GOOD = {"role": "assistant", "content": "ok"}


def body(**fields: object) -> str:
    return json.dumps(fields)


MALFORMED = {
    "not json": "<html>502 Bad Gateway</html>",
    "empty body": "",
    "truncated json": '{"choices": [{"message": {"content": "hel',
    "a json list": "[1, 2]",
    "content is a list": body(
        choices=[{"message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}}]
    ),
    "content is a number": body(choices=[{"message": {"role": "assistant", "content": 7}}]),
    "missing choices": body(id="x", object="chat.completion"),
    "choices not a list": body(choices="x"),
    "null message": body(choices=[{"message": None, "finish_reason": "stop"}]),
    "message not an object": body(choices=[{"message": "hello"}]),
    "tool_calls not a list": body(choices=[{"message": {**GOOD, "tool_calls": "zz"}}]),
    "a tool call not an object": body(choices=[{"message": {**GOOD, "tool_calls": [1]}}]),
    "a tool call without a name": body(
        choices=[{"message": {**GOOD, "tool_calls": [{"id": "c", "function": {}}]}}]
    ),
    "usage not numbers": body(choices=[{"message": GOOD}], usage={"prompt_tokens": "many"}),
}


def unwaited_cli_environment() -> dict[str, str]:
    """For `python -m tests.helpers.retry_waits`: the command line as `python -m mulligan.cli`
    runs it, retrying malformed replies as often, without the seconds of backoff between."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}
    return env | {"PYTHONPATH": str(ROOT)}


def client(server: FakeOpenAIServer, retries: int = 2) -> OpenAIChatModel:
    return OpenAIChatModel(
        "gpt-4o-mini", base_url=server.base_url, max_retries=retries, sleep=lambda s: None
    )


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=list(MALFORMED))
def test_a_malformed_reply_is_retried_then_a_model_error(raw: str) -> None:
    with FakeOpenAIServer([FakeReply(raw_body=raw)] * 3) as server:
        with pytest.raises(ModelError, match="malformed reply") as caught:
            client(server).chat([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 3  # the first try and two retries
    assert caught.value.body == raw[:2000]


def test_a_body_read_as_bytes_is_read_like_its_text() -> None:
    reply = body(choices=[{"message": {"role": "assistant", "content": "héllo"}}])
    assert read_completion(reply.encode()).text == read_completion(reply).text == "héllo"
    with pytest.raises(MalformedReply) as caught:
        read_completion(b"\xff\xfe<html>not utf-8</html>")
    assert "<html>not utf-8</html>" in caught.value.body  # quoted as text, not as bytes


def test_a_malformed_reply_then_a_good_one_succeeds() -> None:
    replies = [FakeReply(raw_body="not json"), FakeReply(malformed="content_list"), FakeReply("ok")]
    with FakeOpenAIServer(replies) as server:
        response = client(server).chat([{"role": "user", "content": "hi"}])
        assert len(server.requests) == 3
    assert response.text == "ok"


def test_the_actor_stops_cleanly_on_malformed_replies() -> None:
    with FakeOpenAIServer([FakeReply(malformed="content_list")] * 3) as server:
        attempt = Actor(client(server)).run("t", "Say hi.", [])
    assert attempt.stop_reason == "model_error"
    assert "malformed reply" in attempt.error
    assert attempt.answer is None


TASKS = """\
- id: hello
  prompt: Say hello.
  checks:
    - {type: contains, text: hello}
"""


@pytest.mark.parametrize("kind", ["not_json", "content_list"])
def test_through_the_cli_no_traceback_and_the_run_ends(tmp_path: Path, kind: str) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS)
    env = unwaited_cli_environment()
    with FakeOpenAIServer(policy=lambda body: FakeReply(malformed=kind)) as server:
        done = subprocess.run(
            [sys.executable, "-m", "tests.helpers.retry_waits", "run", str(tasks), "--json",
             "--base-url", server.base_url, "--model", "m", "--memory", str(tmp_path / "mem")],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        assert len(server.requests) == 4  # one try and three retries, then the attempt stops
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stderr
    assert "model_error" in done.stderr or "endpoint" in done.stderr
    line = json.loads(done.stdout.strip())
    assert line["passed"] is False
    assert line["attempts"][0]["stop_reason"] == "model_error"
    runs = Memory(tmp_path / "mem").log.runs()
    assert [r["status"] for r in runs] == ["finished"]
    assert runs[0]["ended_at"]


@pytest.mark.parametrize(
    "route, raw",
    [
        ("/embeddings", "not json"),
        ("/embeddings", json.dumps({"data": [{"embedding": None}]})),
        ("/models", json.dumps({"data": [{"object": "model"}]})),
    ],
)
def test_malformed_embeddings_and_model_lists_are_model_errors(route: str, raw: str) -> None:
    with FakeOpenAIServer(route_bodies={route: raw}) as server:
        model = client(server, retries=1)
        with pytest.raises(ModelError, match="malformed reply"):
            model.embed(["a"]) if route == "/embeddings" else model.list_models()


CAPITAL = """\
- id: capital
  prompt: What is the capital of Australia?
  checks:
    - {type: exact_match, answer: Canberra}
"""


def test_an_endpoint_fault_outside_an_attempt_ends_the_run_in_the_log(tmp_path: Path) -> None:
    """The store's embeddings come from the endpoint; when they are garbage the run stops
    with one line, and the log does not keep the run "running"."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(CAPITAL)
    env = unwaited_cli_environment()
    lessons = json.dumps({"diagnosis": "Recall the capital is Canberra, not Sydney.", "lesson": ""})

    def policy(body: dict[str, object]) -> FakeReply:
        reflecting = "You review a failed attempt" in json.dumps(body["messages"])
        return FakeReply(content=lessons if reflecting else "Sydney")

    bad = {"/embeddings": "<html>gateway</html>"}
    for command in (["run", "--strategy", "reflexion-memory"], ["bench", "--strategies",
                    "reflexion-memory", "--out", str(tmp_path / "bench")]):  # fmt: skip
        memory = tmp_path / f"mem-{command[0]}"
        with FakeOpenAIServer(policy=policy, route_bodies=bad) as server:
            done = subprocess.run(
                [sys.executable, "-m", "tests.helpers.retry_waits", command[0], str(tasks),
                 *command[1:], "--trials", "2", "--base-url", server.base_url, "--model", "m",
                 "--memory", str(memory), "--embedding", "openai"],
                capture_output=True, text=True, timeout=120, env=env,
            )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 1, done.stderr
        assert "malformed reply" in done.stderr
        assert [r["status"] for r in Memory(memory).log.runs()] == ["failed"]


def test_a_reply_holding_lone_surrogates_is_sent_back_and_logged_as_text() -> None:
    """`\\ud800` is valid JSON but no character: the model's text and its call come back with
    U+FFFD in its place, so the next request and the attempt's record can be written."""
    lone = "\ud800"
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": "echo" + lone, "arguments": json.dumps({"text": lone})}
    message = {"role": "assistant", "content": f"Thinking {lone}", "tool_calls": [call]}
    first = body(choices=[{"message": message, "finish_reason": "tool_calls"}])
    with FakeOpenAIServer([FakeReply(raw_body=first), FakeReply("done")]) as server:
        attempt = Actor(client(server)).run("t", "Say hi.", [])
        sent = server.requests[-1]["messages"]
    assert attempt.stop_reason == "answered" and len(sent) == 4
    assert attempt.steps[0].text == "Thinking \ufffd"
    assert attempt.steps[0].tool_calls[0].name == "echo\ufffd"
    assert json.loads(attempt.model_dump_json())["answer"] == "done"
    streamed = read_stream([{"choices": [{"delta": {"content": lone}}]}], read_whole)
    assert streamed.completion.text == "\ufffd"
