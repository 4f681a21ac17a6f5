"""What the concurrency benchmarks share: one-call tasks run as full react episodes against
the fake OpenAI-compatible server, in a process of its own as a real endpoint would be."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mulligan.actor import ActorSettings
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.runs.build import build_loop
from mulligan.runs.runner import run_tasks
from mulligan.schema import ContainsCheck, Episode, Task


def say_ok_tasks(count: int) -> list[Task]:
    return [
        Task(id=f"t{n}", prompt=f"Say ok ({n}).", checks=[ContainsCheck(text="ok")])
        for n in range(count)
    ]


@contextmanager
def fake_endpoint(latency: float) -> Iterator[str]:
    """The fake server answering "ok" to each call after `latency` seconds; yields its URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "mulligan.llm.fake_server", "ok", str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    try:
        yield server.stdout.readline().strip()
    finally:
        server.stdin.close()
        server.wait(timeout=10)


@contextmanager
def fresh_memory() -> Iterator[Memory]:
    with tempfile.TemporaryDirectory() as home:
        yield Memory(home, HashEmbedding())


def run_react(
    base_url: str, memory: Memory, tasks: list[Task], concurrency: int, executor: Any = None
) -> list[Episode]:
    """Each task as a react episode, logged to `memory`, `concurrency` at a time."""
    model = OpenAIChatModel("fake", base_url=base_url, max_retries=0)
    return run_tasks(
        lambda: build_loop(
            model, LoopSettings(strategy="react"), ActorSettings(), memory, "one-call"
        ),
        tasks,
        run_id="one-call",
        strategy="react",
        memory=memory,
        concurrency=concurrency,
        executor=executor,
    )
