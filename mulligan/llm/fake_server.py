"""`FakeOpenAIServer`: an OpenAI-compatible HTTP server on 127.0.0.1 that scripts replies,
tool calls, usage, errors, delays and malformed output, and checks every request it gets
for orphan tool calls. Tests drive the real `openai` SDK against it; `mulligan demo` runs
its study on it."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mulligan.llm.scripted import next_call_number
from mulligan.llm.tokens import raw_estimate


@dataclass
class FakeReply:
    content: str | None = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """Each {"name", "arguments" (dict, or a string sent as it is), optional "id"}."""
    status: int = 200
    error: str = ""
    delay: float = 0.0
    usage: tuple[int, int] | None = None
    finish_reason: str | None = None
    raw_body: str | None = None
    """Send this text as the whole response body (malformed responses)."""
    malformed: str | None = None
    """A malformed 200 reply by name, one of MALFORMED_BODIES (`not_json`, `content_list`, ...)."""
    chunk_delay: float = 0.0
    """Streamed (a request with `stream`): seconds between chunks, a model generating."""
    counts_per_chunk: bool = True
    """Streamed: send llama.cpp's per-token `timings` when asked (False: a server that
    reports its usage only at the end)."""
    hang_up: bool = False
    """Close the connection without a reply (a server killed mid-request)."""
    fingerprint: str | None = None
    """The `system_fingerprint` the reply (and each streamed chunk) carries."""


MALFORMED_BODIES = {
    "not_json": "<html><body>upstream sent garbage</body></html>",
    "empty": "",
    "truncated": '{"id": "chatcmpl-1", "choices": [{"message": {"content": "hel',
    "content_list": json.dumps(
        {"choices": [{"message": {"role": "assistant", "content": [{"type": "text"}]}}]}
    ),
    "no_choices": json.dumps({"id": "chatcmpl-1", "object": "chat.completion"}),
    "null_message": json.dumps({"choices": [{"message": None, "finish_reason": "stop"}]}),
    "bad_tool_calls": json.dumps(
        {"choices": [{"message": {"role": "assistant", "content": "", "tool_calls": [1]}}]}
    ),
}
"""200 bodies that are not chat completions, as some servers and proxies send them."""


FakePolicy = Callable[[dict[str, Any]], FakeReply]


def orphan_problems(messages: list[dict[str, Any]]) -> list[str]:
    """What an OpenAI-compatible server would reject about the tool-call pairing."""
    problems = []
    open_ids: list[str] = []
    for position, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_ids:
                problems.append(f"message {position}: tool result {call_id!r} answers no open call")
            else:
                open_ids.remove(call_id)
            continue
        if open_ids:
            problems.append(f"message {position}: calls {open_ids} have no result before it")
            open_ids = []
        if role == "assistant" and message.get("tool_calls"):
            if message.get("content") is None:
                problems.append(f"message {position}: assistant content is null")
            open_ids = [c["id"] for c in message["tool_calls"]]
    if open_ids:
        problems.append(f"end: calls {open_ids} have no result")
    return problems


class FakeOpenAIServer:
    """An OpenAI-compatible endpoint on 127.0.0.1 for tests; use as a context manager."""

    def __init__(
        self,
        replies: Iterable[FakeReply] = (),
        policy: FakePolicy | None = None,
        route_bodies: dict[str, str] | None = None,
    ) -> None:
        self.replies = list(replies)
        self.policy = policy
        self.route_bodies = route_bodies or {}
        """Path ending ("/embeddings", "/models") -> a 200 body sent as it is (malformed)."""
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        """Each chat request's HTTP headers (names lower-cased), in the order of `requests`."""
        self.violations: list[str] = []
        self.streams: list[StreamRecord] = []
        """Each streamed reply: how many of its chunks went out, and whether the client
        closed it before the end (a server that then stops generating)."""
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def next_reply(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> FakeReply:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers or {})
            for problem in orphan_problems(body.get("messages", [])):
                self.violations.append(f"request {len(self.requests)}: {problem}")
            if self.replies:
                return self.replies.pop(0)
            if self.policy is not None:
                return self.policy(body)
            self.violations.append(f"request {len(self.requests)}: no scripted reply left")
            return FakeReply(status=500, error="fake server: no scripted reply left")


def completion_body(body: dict[str, Any], planned: FakeReply) -> dict[str, Any]:
    calls = [
        {
            "id": call.get("id") or f"call_{n}_{next_call_number()}",
            "type": "function",
            "function": {"name": call["name"], "arguments": _json_text(call["arguments"])},
        }
        for n, call in enumerate(planned.tool_calls)
    ]
    prompt, completion = planned.usage or (
        round(raw_estimate(body.get("messages", []), body.get("tools"))),
        max(1, len(planned.content or "") // 4),
    )
    message: dict[str, Any] = {"role": "assistant", "content": planned.content}
    if calls:
        message["tool_calls"] = calls
    return {
        **_fingerprint(planned),
        "id": f"chatcmpl-{next_call_number()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": planned.finish_reason or ("tool_calls" if calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _fingerprint(planned: FakeReply) -> dict[str, str]:
    return {"system_fingerprint": planned.fingerprint} if planned.fingerprint else {}


def embeddings_body(body: dict[str, Any]) -> dict[str, Any]:
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    data = [
        {"object": "embedding", "index": i, "embedding": hash_vector(t)}
        for i, t in enumerate(texts)
    ]
    usage = {"prompt_tokens": 0, "total_tokens": 0}
    return {"object": "list", "data": data, "model": body.get("model"), "usage": usage}


@dataclass
class StreamRecord:
    pieces: int
    """Content chunks the reply has, one "token" each (a word and the blank before it)."""
    sent: int = 0
    """Content chunks written before the end or the client's close."""
    closed_early: bool = False


def stream_chunks(body: dict[str, Any], planned: FakeReply) -> tuple[list[Any], list[Any]]:
    """A chunk per content piece, with llama.cpp-style per-token `timings` when the request
    asks for them (`timings_per_token`); then the finish and, when asked, the usage."""
    pieces = re.findall(r"\s*\S+|\s+", planned.content or "")
    prompt = planned.usage[0] if planned.usage else round(raw_estimate(body.get("messages", [])))
    timed = body.get("timings_per_token") and planned.counts_per_chunk
    chunks = []
    for made, piece in enumerate(pieces, start=1):
        choice = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
        chunk: dict[str, Any] = {"object": "chat.completion.chunk", "choices": [choice]}
        if timed:
            chunk["timings"] = {"cache_n": 0, "prompt_n": prompt, "predicted_n": made}
        chunks.append(chunk | _fingerprint(planned))
    finish = {"index": 0, "delta": {}, "finish_reason": planned.finish_reason or "stop"}
    ending: list[Any] = [{"object": "chat.completion.chunk", "choices": [finish]}]
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": prompt, "completion_tokens": len(chunks)}
        ending.append({"object": "chat.completion.chunk", "choices": [], "usage": usage})
    return chunks, ending


def hash_vector(text: str, dimensions: int = 64) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [(digest[i % len(digest)] - 128) / 128 for i in range(dimensions)]


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
        wbufsize = -1  # headers and body leave in one write (no Nagle delay)

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _send(self, status: int, payload: Any) -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def do_GET(self) -> None:
            self._route(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            self._route(json.loads(self.rfile.read(length) or b"{}"))

        def _route(self, body: dict[str, Any] | None) -> None:
            """A scripted body for the path, else the route; `body` None for a GET."""
            path = self.path.rstrip("/")
            ends = (text for end, text in server.route_bodies.items() if path.endswith(end))
            if (scripted := next(ends, None)) is not None:
                self._send(200, scripted.encode())
            elif body is None and path.endswith("/models"):
                self._send(
                    200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
                )
            elif body is not None and path.endswith("/embeddings"):
                self._send(200, embeddings_body(body))
            elif body is not None and path.endswith("/chat/completions"):
                self._chat(body)
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def _chat(self, body: dict[str, Any]) -> None:
            headers = {name.lower(): value for name, value in self.headers.items()}
            planned = server.next_reply(body, headers)
            if planned.hang_up:
                self.close_connection = True
                return
            time.sleep(planned.delay)
            raw, status = planned.raw_body, planned.status
            if planned.malformed is not None:
                raw, status = MALFORMED_BODIES[planned.malformed], 200
            if raw is not None:
                self._send(status, raw.encode())
            elif status != 200:
                error = {"message": planned.error or "scripted error", "type": "fake"}
                self._send(status, {"error": error})
            elif body.get("stream"):
                self._stream(body, planned)
            else:
                self._send(200, completion_body(body, planned))

        def _stream(self, body: dict[str, Any], planned: FakeReply) -> None:
            """Server-sent events, a chunk per piece, then the finish, the usage and [DONE];
            a client that closes the stream ends it (recorded)."""
            chunks, ending = stream_chunks(body, planned)
            record = StreamRecord(len(chunks))
            with server._lock:
                server.streams.append(record)
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for chunk in chunks + ending:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    record.sent += chunk in chunks
                    time.sleep(planned.chunk_delay)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                record.closed_early = True

    return Handler


def serve_constant(content: str, delay: float) -> None:
    """`python -m mulligan.llm.fake_server REPLY DELAY`: a fake endpoint in a process of its own.

    Prints its base URL, answers every chat call with REPLY after DELAY seconds,
    and stops when its standard input closes (for benchmarks).
    """
    import sys

    policy = lambda body: FakeReply(content=content, delay=delay)  # noqa: E731
    with FakeOpenAIServer(policy=policy) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    import sys

    serve_constant(sys.argv[1], float(sys.argv[2]))
