"""Stand-in for `python -m llama_cpp.server`: the same flags, an OpenAI-compatible endpoint
on the given loopback port that answers "4". It tests how mulligan starts, waits for and
stops the server (it loads no model); tests/llm/test_local_server.py also runs the real one.

STANDIN_PIDFILE: append this process's pid there. STANDIN_DELAY: seconds each chat reply
waits (a model that is thinking). STANDIN_STATUS: the HTTP status of every chat reply
(an endpoint that fails)."""

from __future__ import annotations

import argparse
import json
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--model", required=True)
parser.add_argument("--model_alias", default="standin")
flags, _ = parser.parse_known_args()
if os.environ.get("STANDIN_PIDFILE"):
    with open(os.environ["STANDIN_PIDFILE"], "a") as pids:
        pids.write(f"{os.getpid()}\n")
USAGE = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def send(self, reply: dict[str, object], status: int = 200) -> None:
        body = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.send({"object": "list", "data": [{"id": flags.model_alias, "object": "model"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/chat/completions"):
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
            self.send(
                {
                    "id": "c",
                    "object": "chat.completion",
                    "model": flags.model_alias,
                    "choices": [choice],
                    "usage": USAGE,
                }
            )
        else:
            choice = {"index": 0, "text": "4", "finish_reason": "stop"}
            self.send({"id": "c", "object": "text_completion", "choices": [choice], "usage": USAGE})


ThreadingHTTPServer((flags.host, flags.port), Handler).serve_forever()
