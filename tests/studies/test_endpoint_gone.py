"""An endpoint that goes away mid-study stops the study: no task is scored as failed because
the server was gone, and `--resume` finishes what is left once it answers again."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.memory import Memory
from mulligan.testing import FakeOpenAIServer, FakeReply

TASKS = "".join(
    f"- id: t{n}\n  prompt: Say {n}.\n  checks:\n    - {{type: exact_match, answer: '{n}'}}\n"
    for n in range(3)
)


def say(body: dict[str, Any]) -> FakeReply:
    asked = str(body["messages"][-1]["content"])
    return FakeReply(content=next(str(n) for n in range(3) if f"Say {n}." in asked))


def bench(tasks: Path, out: Path, server: FakeOpenAIServer, *more: str) -> int:
    return main(
        [
            "bench", str(tasks), "--strategies", "react", "--out", str(out), "--model", "m",
            "--base-url", server.base_url, "--embedding", "hash", *more,
        ]
    )  # fmt: skip


def test_a_study_stops_when_the_endpoint_goes_away_and_resumes_later(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unwaited_retries: None
) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS)
    out = tmp_path / "study"
    gone = FakeOpenAIServer()
    answered: list[int] = []

    def answer_once_then_go(body: dict[str, Any]) -> FakeReply:
        if answered:  # the server was killed after its first reply
            threading.Thread(target=gone.stop).start()
            return FakeReply(hang_up=True)
        answered.append(1)
        return say(body)

    gone.policy = answer_once_then_go
    with gone:
        assert bench(tasks, out, gone) == 1
    told = capsys.readouterr().err
    assert "unreachable" in told and "--resume" in told, told
    log = Memory(out / "memory").log
    [run] = log.runs()
    assert run["status"] == "failed"
    episodes = log.episodes(run["id"])
    scored = [e for e in episodes if log.is_finished(e["id"])]
    assert len(scored) == 1 and scored[0]["passed"]  # only the task the server answered

    with FakeOpenAIServer(policy=say) as back:
        assert bench(tasks, out, back, "--resume", run["id"]) == 0
    episodes = log.episodes(run["id"])
    assert [bool(e["passed"]) for e in episodes] == [True, True, True]
    reasons = [[a.stop_reason for a in log.episode(e["id"]).attempts] for e in episodes]
    assert reasons == [["answered"]] * 3, reasons
