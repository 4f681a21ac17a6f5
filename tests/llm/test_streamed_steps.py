"""A text-protocol step against a self-hosted endpoint is streamed and read only until its
first action is written whole: the rest of the reply (observations the model imagines, more
actions) is neither read nor generated, since closing the stream stops the server; its tokens
are the server's own count up to the stop. Through the real openai SDK against the fake
server, and against llama.cpp's real server (SmolLM2) for the stop."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from mulligan.actor import Actor, ActorSettings, text_protocol, tool
from mulligan.actor.text_protocol import ActionWatch, action_ended
from mulligan.llm.fake_server import FakeOpenAIServer, FakeReply
from mulligan.llm.local_server import LocalServer
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.llm.pricing import Price
from tests.llm.smollm2 import smollm2  # noqa: F401 (the fixture)

pytestmark = pytest.mark.timeout(600)

ACTED = 'Thought: I read the notes first.\nAction: read_notes\nAction Input: {"topic": "dragons"}'
IMAGINED = "\nObservation: the notes say 42\nThought: so it is 42 " + "and more " * 150
PROMPT_TOKENS = 321


@tool
def read_notes(topic: str) -> str:
    """Use to read the notes on a topic."""
    return f"notes on {topic}: the answer is 7"


def pieces(text: str) -> int:
    """The fake server's tokens: a word and the blank before it."""
    return len(re.findall(r"\s*\S+|\s+", text))


def replies(body: dict[str, Any]) -> FakeReply:
    if "the answer is 7" in str(body["messages"][-1]["content"]):
        return FakeReply(content="Thought: done\nFinal Answer: 7", usage=(PROMPT_TOKENS, 0))
    return FakeReply(content=ACTED + IMAGINED, usage=(PROMPT_TOKENS, 0), chunk_delay=0.005)


def run(server: FakeOpenAIServer, **client: Any) -> Any:
    model = OpenAIChatModel("fake", base_url=server.base_url, price=Price(0, 0), **client)
    actor = Actor(model, ActorSettings(protocol="text"))
    return actor.run("t", "What do the notes on dragons say?", [read_notes])


def test_a_streamed_step_stops_at_its_action_counted_as_the_server_counts() -> None:
    with FakeOpenAIServer(policy=replies) as server:
        attempt = run(server)
    first, final = attempt.steps
    assert first.text == ACTED and first.discarded == ""  # the imagined rest was never read
    assert first.tool_calls[0].name == "read_notes"
    assert json.loads(first.tool_calls[0].arguments) == {"topic": "dragons"}
    assert "the answer is 7" in first.results[0].output
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (
        PROMPT_TOKENS, pieces(ACTED)
    )  # fmt: skip  # the timings of the last chunk read: what the server had generated
    assert first.usage.unmetered_calls == 0
    cut, whole = server.streams
    assert cut.closed_early and cut.sent < cut.pieces == pieces(ACTED + IMAGINED)
    assert not whole.closed_early and whole.sent == whole.pieces
    # the final answer was read to its end: the usage the server sent at the end
    assert final.kind == "final" and attempt.answer == "7"
    assert final.usage.completion_tokens == pieces("Thought: done\nFinal Answer: 7")
    asked = server.requests[0]
    assert asked["stream"] and asked["stream_options"] == {"include_usage": True}
    assert asked["timings_per_token"] is True


def test_off_the_reply_is_read_whole_and_the_rest_kept_as_discarded() -> None:
    with FakeOpenAIServer(policy=replies) as server:
        attempt = run(server, stream_until=False)  # as against a hosted API
    first = attempt.steps[0]
    assert first.text == ACTED and first.discarded == IMAGINED
    assert "stream" not in server.requests[0] and server.streams == []


def test_a_stream_closed_before_any_count_is_unmetered_not_guessed() -> None:
    def no_counts(body: dict[str, Any]) -> FakeReply:
        return FakeReply(content=ACTED + IMAGINED, chunk_delay=0.005, counts_per_chunk=False)

    with FakeOpenAIServer(policy=no_counts) as server:
        model = OpenAIChatModel("fake", base_url=server.base_url, price=Price(0, 0))
        reply = model.chat([{"role": "user", "content": "go"}], until=ActionWatch)
    assert reply.text == ACTED and server.streams[0].closed_early
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (0, 0)
    assert reply.usage.unmetered_calls == 1


def test_an_endpoint_that_refuses_to_stream_is_asked_again_whole() -> None:
    refusal = FakeReply(status=400, error="unknown field: timings_per_token")
    with FakeOpenAIServer([refusal, FakeReply(content=ACTED + IMAGINED)]) as server:
        model = OpenAIChatModel("fake", base_url=server.base_url, price=Price(0, 0))
        reply = model.chat([{"role": "user", "content": "go"}], until=ActionWatch)
    assert reply.text == ACTED + IMAGINED and not model.stream_until
    assert server.requests[0]["stream"] and "stream" not in server.requests[1]


def test_the_end_of_an_action_is_where_its_input_closes() -> None:
    assert not action_ended('Thought: x\nAction: read_notes\nAction Input: {"topic": "dra')
    assert action_ended('Thought: x\nAction: read_notes\nAction Input: {"topic": "dragons"}')
    assert not action_ended("Thought: x\nAction: python\nAction Input: print(1)")
    assert action_ended("Thought: x\nAction: python\nAction Input: print(1)\nThought: next")
    assert not action_ended('Final Answer: use Action: read_notes\nAction Input: {"a": 1}')
    assert not action_ended("Thought: I will think a long time about it")


RAMBLING = "Thought: I weigh which action: the notes, or a guess {maybe}\n" * 150
WATCHED = [
    ACTED + IMAGINED,
    RAMBLING[:300] + ACTED,
    "Thought: x\nAction: python\nAction Input: print(1)\nThought: next",
    "Thought: x\nAction: python\nAction Input: d = {'a': 1}\nprint(d)\n**Observation**: 1",
    'Final Answer: use Action: read_notes\nAction Input: {"a": 1}',
    'Thought: x\nObservation: 1\nAction: read_notes\nAction Input: {"a": 1}',
    'Thought: x\n\n**Action**\n:  read_notes\n\n Action Input\n: {"topic": "a:}"} more',
    'Thought: x\nFinal Answer\n  :\nAction: read_notes\nAction Input: {"a": 1}',
    '**Thought 1:** x\n## Action 1: read_notes {"topic": "dragons"} and on',
    'Thought: x {"a": 1}\nAction: read_notes\nThought: y\nAction Input: {"b": 2}',
    'Action: read_notes\nAction Input: {"code": "if x:\\n  y = {1: 2}"}\nObservation: z',
    "Action: python\nAction Input: x = 1\nFinal Answer: 2",
    "Thought: I will think a long time about it: at length\n" * 3,
    'Action:\nAction Input: **{"a": 1}{"a":',
    'Action*\n\n: go {"y": "}"}] more',
    'Action: x\nAction Input: {"code": "x \\" } \\\\", "b": {"c": "}"}} tail',
    'Action: x\nAction Input: {"a": 1}}\nAction Input: {"b": 2} more',
]


@pytest.mark.parametrize("text", WATCHED)
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_the_action_watch_says_what_action_ended_says_at_every_piece(text: str, size: int) -> None:
    """Told the reply piece by piece, the watch holds exactly where the text so far holds
    a whole first action (pieces of every size, labels split across them and lines)."""
    watch = ActionWatch()
    for end in range(size, len(text) + size, size):
        held = watch(text[end - size : end])
        assert held == action_ended(text[:end]), (text[:end], held)


def test_a_long_streamed_turn_is_read_once_not_again_at_every_piece(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Watching for the end of the first action read the whole text so far at each streamed
    piece: a reply of N pieces cost N^2 / 2 of them (minutes for a megabyte)."""
    read: list[int] = []
    action_end = text_protocol._action_end

    def counted(text: str) -> Any:
        read.append(len(text))
        return action_end(text)

    monkeypatch.setattr(text_protocol, "_action_end", counted)

    def rambling(body: dict[str, Any]) -> FakeReply:
        if "the answer is 7" in str(body["messages"][-1]["content"]):
            return FakeReply(content="Final Answer: 7", usage=(PROMPT_TOKENS, 0))
        return FakeReply(content=RAMBLING + ACTED + IMAGINED, usage=(PROMPT_TOKENS, 0))

    with FakeOpenAIServer(policy=rambling) as server:
        attempt = run(server)
    first = attempt.steps[0]
    assert first.text == RAMBLING + ACTED and first.discarded == ""
    assert server.streams[0].closed_early and attempt.answer == "7"
    assert first.usage.completion_tokens == pieces(RAMBLING + ACTED)
    assert sum(read) <= 4 * len(RAMBLING + ACTED + IMAGINED), sum(read)


def test_an_action_input_that_never_closes_is_read_once_not_at_every_brace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A JSON input's braces inside its strings close nothing: asking `action_ended` again at
    each of them read the input N^2 / 2 times over (code with a dict a line)."""
    read: list[int] = []
    action_end = text_protocol._action_end
    monkeypatch.setattr(
        text_protocol, "_action_end", lambda t: read.append(len(t)) or action_end(t)
    )
    text = 'Action: python\nAction Input: {"code": "' + 'd = {1: 2}  # \\"{\\\\\n' * 300
    watch = ActionWatch()
    assert not any(watch(piece) for piece in re.findall(r"\s*\S+|\s+", text))
    assert watch('"}') and action_ended(text + '"}')
    assert sum(read) <= 4 * len(text), sum(read)


CANCELLED = "stop: cancel task"


def lines_watch(lines: int) -> Callable[[str], bool]:
    """A watch holding once the reply has `lines` line breaks."""
    seen = [0]

    def watch(piece: str) -> bool:
        seen[0] += piece.count("\n")
        return seen[0] >= lines

    return watch


def released_after_cancel(server: LocalServer, cancels_before: int) -> int:
    """The tokens in the slot when llama.cpp released it after cancelling the request (its own
    log, written a moment after the fact: the release that follows the new cancel line, not
    an earlier request's release that lands late)."""
    assert server.log_path is not None
    for _ in range(600):
        text = server.log_path.read_text()
        cancels = [found.end() for found in re.finditer(CANCELLED, text)]
        if len(cancels) > cancels_before:
            release = re.search(r"stop processing: n_tokens = (\d+)", text[cancels[-1] :])
            if release:
                return int(release.group(1))
        time.sleep(0.1)
    raise AssertionError("llama.cpp never cancelled the request: the stream was not closed")


def test_closing_the_stream_stops_llama_cpp_generating(smollm2: LocalServer) -> None:  # noqa: F811
    assert smollm2.log_path is not None
    before = smollm2.log_path.read_text().count(CANCELLED)
    model = OpenAIChatModel(smollm2.model.alias, base_url=smollm2.base_url, price=Price(0, 0))
    asked = [{"role": "user", "content": "Count from 1 to 500, one number per line."}]
    reply = model.chat(asked, max_tokens=1000, until=lambda: lines_watch(4))
    assert reply.text.count("\n") >= 4 and reply.usage.unmetered_calls == 0
    assert 0 < reply.usage.completion_tokens < 200 and reply.usage.prompt_tokens > 0
    held = released_after_cancel(smollm2, before)  # the prompt and what was generated
    assert held <= reply.usage.prompt_tokens + reply.usage.completion_tokens + 4
    assert held < reply.usage.prompt_tokens + 1000
