"""The local model's server under concurrent requests: aggregate and per-request tokens/s,
time to first token, and prompt tokens served from the prompt cache.

Starts the `--model` (default `local`: the model of the `local` extra) on llama.cpp's server
as mulligan does (xllamacpp, `--slots` slots, each `--threads` setting in turn), then sends
the same prompts at 1, 2 and 4 requests at once (`--levels`), streamed, and prints one line
per level: tokens generated per second of wall time over all requests (aggregate), each
request's own rate after its first token (mean), time to its first token (mean), and how
many of the prompt tokens the server took from its cache. The prompts share a long system
prompt, as an agent's requests do. llama-cpp-python's Python server is measured the same way
with `--old` (in this Python, or the one `--old-python` names); nothing builds it. Each level
is sent a second time through mulligan's own client, to show what mulligan's side costs. On
a machine shared with other work the figures are slower than idle: compare lines of one run,
not runs.

    pip install -e ".[local]"
    python benchmarks/local_model.py [--model local:PATH.gguf] [--threads 1,2] [--levels 1,2,4]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mulligan import prompts
from mulligan.llm import local_model, local_server
from mulligan.llm.base import Message
from mulligan.llm.local_server import ServerSettings
from mulligan.llm.openai_client import OpenAIChatModel

TASKS = [
    "Write a Python function that returns the n-th Fibonacci number.",
    "Write a Python function that checks whether a string is a palindrome.",
    "Write a Python function that merges two sorted lists into one sorted list.",
    "Write a Python function that counts the words in a text.",
]


def system_prompt() -> str:
    """The text protocol's system prompt with the built-in tools, as the actor sends it."""
    tools = [
        "python(code: str): run Python code",
        "read_file(path: str): read a file",
        "write_file(path: str, content: str): write a file",
    ]
    return prompts.render("actor_text", tools=tools, tool_names="python, read_file, write_file")


@dataclass
class Reply:
    first_token_s: float
    seconds: float
    completion_tokens: int
    prompt_tokens: int
    cached_tokens: int


def ask(base_url: str, model: str, task: str, reply_tokens: int) -> Reply:
    """One streamed chat completion; times from sending it."""
    body = {
        "model": model,
        "messages": [
            {"role": "system", "content": system_prompt()},
            {"role": "user", "content": task},
        ],
        "max_tokens": reply_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    started = time.perf_counter()
    first, pieces = 0.0, 0
    usage: dict[str, Any] = {}
    with urllib.request.urlopen(request, timeout=1800) as stream:
        for raw in stream:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data:"))
            delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
            if delta.get("content"):
                first = first or time.perf_counter() - started
                pieces += 1
            usage = chunk.get("usage") or usage
    details = usage.get("prompt_tokens_details") or {}
    return Reply(  # a server that reports no usage in a stream: a token per content chunk
        first,
        time.perf_counter() - started,
        int(usage.get("completion_tokens") or pieces),
        int(usage.get("prompt_tokens") or 0),
        int(details.get("cached_tokens") or 0),
    )


def all_at_once(one: Callable[[int], None], at_once: int) -> float:
    """`one(0)` ... `one(at_once - 1)` on threads started together; the wall seconds."""
    started = time.perf_counter()
    workers = [threading.Thread(target=one, args=(i,)) for i in range(at_once)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started


def level(base_url: str, model: str, at_once: int, reply_tokens: int) -> str:
    """`at_once` requests sent together; one line of figures."""
    replies: list[Reply] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        reply = ask(base_url, model, TASKS[index % len(TASKS)], reply_tokens)
        with lock:
            replies.append(reply)

    wall = all_at_once(one, at_once)
    tokens = sum(r.completion_tokens for r in replies)
    own = [r.completion_tokens / max(r.seconds - r.first_token_s, 1e-9) for r in replies]
    prompt, cached = sum(r.prompt_tokens for r in replies), sum(r.cached_tokens for r in replies)
    first = statistics.mean(r.first_token_s for r in replies)
    return (
        f"  {at_once} at once: aggregate {tokens / wall:5.1f} tokens/s, per request "
        f"{statistics.mean(own):5.1f} tokens/s, first token {first:5.1f} s, "
        f"from cache {cached}/{prompt} prompt tokens ({tokens} tokens in {wall:.1f} s)"
    )


def through_mulligan(base_url: str, model: str, at_once: int, reply_tokens: int) -> str:
    """The same requests through mulligan's own client (the openai SDK, streamed as a step
    is): aggregate tokens/s and each request's rate after its first token, the figures to
    set beside the bare server's line (the rate after the first token does not depend on
    which of the two found the prompt in the cache)."""
    client = OpenAIChatModel(model, base_url=base_url, timeout=1800, price=None)
    rates: list[float] = []
    tokens: list[int] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        messages: list[Message] = [
            {"role": "system", "content": system_prompt()},
            {"role": "user", "content": TASKS[index % len(TASKS)]},
        ]
        sent, first = time.perf_counter(), list[float]()

        def first_token(piece: str) -> bool:
            if piece and not first:
                first.append(time.perf_counter())
            return False

        reply = client.chat(messages, max_tokens=reply_tokens, until=lambda: first_token)
        own = reply.usage.completion_tokens / max(time.perf_counter() - (first or [sent])[0], 1e-9)
        with lock:
            tokens.append(reply.usage.completion_tokens)
            rates.append(own)

    wall = all_at_once(one, at_once)
    return (
        f"  {at_once} at once through mulligan: aggregate {sum(tokens) / wall:5.1f} tokens/s, "
        f"per request {statistics.mean(rates):5.1f} tokens/s"
    )


def measure(
    label: str, base_url: str, model: str, levels: list[int], reply_tokens: int, ours: bool
) -> None:
    print(label, flush=True)
    for at_once in levels:
        print(level(base_url, model, at_once, reply_tokens), flush=True)
        if ours:
            print(through_mulligan(base_url, model, at_once, reply_tokens), flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def old_server(path: Path, threads: int, python: str) -> Iterator[str]:
    """llama-cpp-python's server (one request at a time), run by `python`."""
    port = free_port()
    command = [python, "-m", "llama_cpp.server", "--model", str(path), "--port", str(port)]
    command += ["--n_ctx", "8192", "--n_threads", str(threads), "--n_threads_batch", str(threads)]
    env = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ}
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    try:
        for _ in range(1200):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5).read()
                break
            time.sleep(0.25)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)


def has_llama_cpp(python: str) -> bool:
    probe = [python, "-c", "import llama_cpp.server"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="local or local:PATH.gguf")
    parser.add_argument("--threads", default="1,2", help="thread counts to measure, in turn")
    parser.add_argument("--levels", default="1,2,4", help="requests at once")
    parser.add_argument("--slots", type=int, default=0, help="default: the largest level")
    parser.add_argument("--reply-tokens", type=int, default=64)
    parser.add_argument("--old", action="store_true", help="also llama-cpp-python's server")
    parser.add_argument(
        "--old-python", default=sys.executable, help="a Python that has llama-cpp-python[server]"
    )
    args = parser.parse_args()
    levels = [int(n) for n in args.levels.split(",")]
    model = local_model.resolve(args.model)
    print(f"model: {model.path.name} ({model.size / 1e9:.2f} GB); {local_server.software()}")
    print(f"{len(TASKS)} prompts, one shared system prompt, {args.reply_tokens}-token replies")
    for threads in [int(n) for n in args.threads.split(",")]:
        settings = ServerSettings(slots=args.slots or max(levels), threads=threads)
        started = time.perf_counter()
        server = local_server.serve(model, settings)
        label = (
            f"llama.cpp server (xllamacpp), {server.slots} slots, {threads} threads, "
            f"{server.context} ctx, started in {time.perf_counter() - started:.1f} s:"
        )
        measure(label, server.base_url, model.alias, levels, args.reply_tokens, ours=True)
        local_server.stop_all()
        if args.old and has_llama_cpp(args.old_python):
            with old_server(model.path, threads, args.old_python) as url:
                label = f"llama-cpp-python server, 1 request at a time, {threads} threads:"
                measure(label, url, model.alias, levels, args.reply_tokens, ours=False)
        elif args.old:
            print("llama-cpp-python is not installed: its server is not measured")


if __name__ == "__main__":
    main()
