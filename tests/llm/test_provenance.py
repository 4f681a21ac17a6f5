"""Every record says what produced it: each request carries a sampling seed (until the
endpoint refuses one), and the seed and the endpoint's `system_fingerprint` reach the
attempt's steps and the episode log, streamed or not; a llama.cpp server another process
runs is recorded with its slots, build and model file, and the report says when several
slots answered."""

from __future__ import annotations

import hashlib
import json
import socket
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mulligan.llm.connect import local_fields
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.llm.streaming import read_whole
from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.report.report import slots_note
from mulligan.report.stats import RunStats
from mulligan.runs.build import build_loop
from mulligan.schema import ExactMatchCheck, Task
from mulligan.testing import FakeOpenAIServer, FakeReply

TASK = Task(
    id="capital-au",
    family="capitals",
    prompt="What is the capital of Australia?",
    checks=[ExactMatchCheck(answer="Canberra")],
)


def test_the_seed_sent_and_the_fingerprint_received_are_in_the_log(tmp_path: Path) -> None:
    replies = [FakeReply(content="Sydney", fingerprint="b6000-aa"), FakeReply(content="Canberra")]
    memory = Memory(tmp_path / "mem", HashEmbedding())
    with FakeOpenAIServer(replies) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, temperature=0.7)
        settings = LoopSettings(strategy="retry", trials=2)
        build_loop(model, settings, memory=memory).run_episode(TASK, "e1")
        sent = [request["seed"] for request in server.requests]
    assert len(set(sent)) == 2 and all(isinstance(seed, int) for seed in sent)
    logged = memory.log.episode("e1")
    assert logged is not None
    assert [(a.steps[0].seed, a.steps[0].fingerprint) for a in logged.attempts] == [
        (sent[0], "b6000-aa"),
        (sent[1], None),
    ]
    with sqlite3.connect(tmp_path / "mem" / "episodes.db") as db:
        rows = db.execute("select seeds, fingerprints from attempts order by trial").fetchall()
    assert [(json.loads(s), json.loads(f)) for s, f in rows] == [
        ([sent[0]], ["b6000-aa"]),
        ([sent[1]], []),
    ]


def test_a_streamed_reply_keeps_its_fingerprint() -> None:
    with FakeOpenAIServer([FakeReply(content="Final Answer: Canberra", fingerprint="fp")]) as s:
        model = OpenAIChatModel("m", base_url=s.base_url, stream_until=True)
        response = model.chat([{"role": "user", "content": "q"}], until=read_whole)
        assert s.requests[0]["stream"] and response.seed == s.requests[0]["seed"]
    assert response.fingerprint == "fp"


def test_an_endpoint_that_refuses_a_seed_is_asked_again_without_and_never_sent_one_again() -> None:
    replies = [
        FakeReply(status=400, error="Unrecognized request argument supplied: seed"),
        FakeReply(content="one"),
        FakeReply(content="two"),
    ]
    with FakeOpenAIServer(replies) as server:
        model = OpenAIChatModel("m", base_url=server.base_url)
        first = model.chat([{"role": "user", "content": "q"}])
        second = model.chat([{"role": "user", "content": "q"}])
        assert ["seed" in request for request in server.requests] == [True, False, False]
    assert (first.text, first.seed, second.text, second.seed) == ("one", None, "two", None)


def test_a_llama_cpp_server_of_another_process_is_recorded_with_slots_build_and_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # where checksums are kept
    gguf = tmp_path / "small.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 8)
    props = {"total_slots": 4, "build_info": "b6001-abc", "model_path": str(gguf)}
    with FakeOpenAIServer(route_bodies={"/props": json.dumps(props)}) as server:
        fields = local_fields(OpenAIChatModel("m", base_url=server.base_url))
    assert fields["local_slots"] == 4 and fields["local_server"] == {"build": "b6001-abc"}
    assert fields["local_model"] == {
        "file": "small.gguf",
        "size": gguf.stat().st_size,
        "sha256": hashlib.sha256(gguf.read_bytes()).hexdigest(),
    }
    with FakeOpenAIServer() as other:  # no /props: not a llama.cpp server
        assert local_fields(OpenAIChatModel("m", base_url=other.base_url)) == {}
    unreadable = Path("/proc/self/mem")  # a file whose reading fails, even for root
    props["model_path"] = str(unreadable)
    with FakeOpenAIServer(route_bodies={"/props": json.dumps(props)}) as server:
        fields = local_fields(OpenAIChatModel("m", base_url=server.base_url))
    assert fields["local_slots"] == 4 and fields["local_model"] == {"file": "mem"}  # no checksum


def test_a_llama_cpp_server_still_starting_is_waited_for_as_a_model_call_would_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run started beside its server (nothing listening yet, then "Loading model") records
    the server's model once it answers, within the patience a model call would have."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    gguf = tmp_path / "small.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 8)
    props = {"total_slots": 2, "build_info": "b1", "model_path": str(gguf)}
    answers = [(503, {"error": {"code": 503, "message": "Loading model"}}), (200, props)]

    class Starting(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = answers.pop(0) if len(answers) > 1 else answers[0]
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    with socket.socket() as probe:  # a port nothing listens on yet
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadingHTTPServer(("127.0.0.1", port), Starting, bind_and_activate=False)

    def open_late() -> None:  # refused until then
        server.server_bind()
        server.server_activate()
        server.serve_forever()

    later = threading.Timer(0.15, open_late)
    later.start()
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", backoff=0.1)
    try:
        fields = local_fields(model)
    finally:
        later.join(0.5)
        server.shutdown()
        server.server_close()
    assert fields["local_model"]["file"] == "small.gguf"
    assert fields["local_slots"] == 2 and answers == [(200, props)]


def test_a_server_that_never_answers_is_recorded_as_such_after_a_model_calls_patience(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", backoff=0.05)
    assert local_fields(model) == {}
    assert "records no model file" in caplog.text and str(port) in caplog.text


@pytest.mark.parametrize(("slots", "said"), [(4, True), (1, False), (None, False)])
def test_the_report_says_when_several_slots_answered(slots: int | None, said: bool) -> None:
    manifest = {} if slots is None else {"local_slots": slots}
    stats = RunStats("r", manifest, 0.0, None, "finished", [], [])
    assert ("4 requests at once" in slots_note(stats)) == said
    assert bool(slots_note(stats)) == said
