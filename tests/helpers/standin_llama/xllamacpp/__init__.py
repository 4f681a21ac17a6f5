"""Stand-in for the `xllamacpp` package in the local-server lifecycle tests (never installed):
the same parameters the child sets, and a `Server` that listens on the given loopback port
(0: one the kernel picks) and answers "4". It tests how mulligan starts, waits for and stops
the server (it loads no model); tests/llm/test_local_slots.py runs the real one.

STANDIN_PIDFILE: append this process's pid there. STANDIN_DELAY: seconds each chat reply
waits (a model that is thinking). STANDIN_STATUS: the HTTP status of every chat reply
(an endpoint that fails). STANDIN_LOAD_ERROR: exit with this message instead of listening
(a model that does not load)."""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

USAGE = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}


class CommonParams:
    def __init__(self) -> None:
        self.model = SimpleNamespace(path="")
        self.model_alias: set[str] = set()
        self.n_parallel, self.n_ctx, self.port = 1, 0, 0
        self.hostnames = ["127.0.0.1"]
        self.cpuparams = SimpleNamespace(n_threads=-1)
        self.cpuparams_batch = SimpleNamespace(n_threads=-1)
        self.cache_prompt = True


def _handler(alias: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def send(self, reply: dict[str, Any], status: int = 200) -> None:
            body = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self.send({"object": "list", "data": [{"id": alias, "object": "model"}]})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self.path.endswith("/chat/completions"):
                choice = {"index": 0, "text": "4", "finish_reason": "stop"}
                self.send(
                    {"id": "c", "object": "text_completion", "choices": [choice], "usage": USAGE}
                )
                return
            if os.environ.get("STANDIN_PIDFILE"):
                with open(os.environ["STANDIN_PIDFILE"] + ".chats", "a") as chats:
                    chats.write("chat\n")  # the model is asked
            time.sleep(float(os.environ.get("STANDIN_DELAY") or 0))
            status = int(os.environ.get("STANDIN_STATUS") or 200)
            if status != 200:
                self.send({"error": {"message": "stand-in says no"}}, status)
                return
            message = {"role": "assistant", "content": "4"}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            self.send({"id": "c", "object": "chat.completion", "model": alias,
                       "choices": [choice], "usage": USAGE})  # fmt: skip

    return Handler


class Server:
    def __init__(self, params: CommonParams) -> None:
        if os.environ.get("STANDIN_LOAD_ERROR"):  # a model llama.cpp cannot load: it exits
            raise SystemExit(f"llama_model_load: error: {os.environ['STANDIN_LOAD_ERROR']}")
        if os.environ.get("STANDIN_PIDFILE"):
            with open(os.environ["STANDIN_PIDFILE"], "a") as pids:
                pids.write(f"{os.getpid()}\n")
        alias = next(iter(params.model_alias), "standin")
        self._http = ThreadingHTTPServer((params.hostnames[0], params.port), _handler(alias))
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        host, port = self._http.server_address[:2]
        self.listening_address = f"http://{host}:{port}"
