"""Exit statuses, the same for every command: 0 all passed, 1 ran but something failed,
2 bad input or usage, 130 interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.helpers.terminal import ctrl_c_reaches_it

TWO_TASKS = """\
- id: four
  prompt: What is 2 + 2?
  checks: [{type: numeric, value: 4}]
- id: five
  prompt: What is 2 + 3?
  checks: [{type: numeric, value: 5}]
"""


def _run(tmp_path: Path, server: FakeOpenAIServer) -> list[str]:
    (tmp_path / "t.yaml").write_text(TWO_TASKS)
    return [
        "run",
        str(tmp_path / "t.yaml"),
        "--base-url",
        server.base_url,
        "--memory",
        str(tmp_path / "mem"),
        "--embedding",
        "hash",
    ]


def test_run_is_0_when_every_task_passed_and_1_when_one_failed(tmp_path: Path) -> None:
    def right(body: dict[str, Any]) -> FakeReply:
        return FakeReply(content="5" if "2 + 3" in str(body["messages"]) else "4")

    with FakeOpenAIServer(policy=right) as server:
        assert main(_run(tmp_path, server)) == 0
    with FakeOpenAIServer(policy=lambda body: FakeReply(content="4")) as server:
        assert main(_run(tmp_path, server)) == 1


def test_usage_mistakes_are_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["nosuchcommand"], ["run"], ["tasks", "examples", "--limit", "x"]):
        with pytest.raises(SystemExit) as caught:
            main(argv)
        assert caught.value.code == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_an_interrupted_run_exits_130_without_a_traceback(tmp_path: Path) -> None:
    """Ctrl-C while the model is thinking: status 130, one line, no traceback."""
    called = threading.Event()

    def slow(body: dict[str, Any]) -> FakeReply:
        called.set()
        time.sleep(20)
        return FakeReply(content="4")

    with FakeOpenAIServer(policy=slow) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}
        process = subprocess.Popen(
            [sys.executable, "-m", "mulligan.cli", *_run(tmp_path, server)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=ctrl_c_reaches_it,
        )
        try:
            # generous: on a starved CPU (a study beside the suite) startup alone can pass 60 s
            assert called.wait(300), "the run never called the model"
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=300)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, err
    assert "Traceback" not in out + err
    assert "interrupted" in err
