"""Verification while working under `--executor ray`: a worker's memory reaches the
assignments through the driver's log, as every other write, so a run on Ray assigns, judges
and pairs as the same run on threads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.memory import HashEmbedding, Memory
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.memory.helpers import DIAGNOSIS, RIGHT, plant, prompt_of
from tests.studies.test_ray_executor import ray_address

pytestmark = pytest.mark.timeout(600)  # a hang guard only, as for every Ray test
__all__ = ["ray_address"]  # a fixture

TASKS = "\n".join(
    f"- id: units-{n}\n  family: units\n  prompt: A path is {n} km long. How long is it in "
    f"metres?\n  checks: [{{type: exact_match, answer: '{n * 1000}'}}]"
    for n in range(1, 6)
)


def policy(body: dict[str, Any]) -> FakeReply:
    """Right only with the candidate in view; the reviewer writes no general lesson."""
    messages = body["messages"]
    if "You review a failed attempt" in messages[0]["content"]:
        return FakeReply(content=f'{{"diagnosis": "{DIAGNOSIS}", "lesson": ""}}')
    text = prompt_of(messages)
    km = int(text.split("A path is ")[1].split(" km")[0])
    return FakeReply(content=str(km * 1000) if RIGHT in text else str(km))


def halves(memory: Path) -> tuple[Any, ...]:
    found = Memory(memory, HashEmbedding())
    rows = [
        (a.task_id, a.trial, a.shown, a.passed, a.pair)
        for a in found.log.assignments_of_lesson("rule")
    ]
    return rows, found.lessons(["rule"])[0].validity


def test_a_run_on_ray_verifies_while_working_as_on_threads(
    ray_address: str, tmp_path: Path
) -> None:
    (tmp_path / "tasks.yaml").write_text(TASKS)
    for name in ("threads", "ray"):
        plant(Memory(tmp_path / name, HashEmbedding()), "rule", RIGHT)
        with FakeOpenAIServer(policy=policy) as server:
            argv = [
                "run", str(tmp_path / "tasks.yaml"), "--strategy", "reflexion-memory",
                "--trials", "3", "--min-similarity", "0", "--base-url", server.base_url,
                "--memory", str(tmp_path / name), "--embedding", "hash",
            ]  # fmt: skip
            assert main([*argv, *(["--executor", "ray"] if name == "ray" else [])]) in (0, 1)
            assert server.violations == []
    on_threads, on_ray = halves(tmp_path / "threads"), halves(tmp_path / "ray")
    assert on_ray == on_threads
    assert on_ray[1].status == "validated" and on_ray[1].evidence.pairs >= 2
