"""Task sets: duplicate ids across files are an error; a carried-reflection window of 0 is 0."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.errors import UserError
from mulligan.loop import LoopSettings
from mulligan.tasks.files import load_task_path
from mulligan.testing import FakeOpenAIServer, FakeReply

ONE = "- id: same\n  prompt: What is 2 + 2?\n  checks: [{type: numeric, value: 4}]\n"
OTHER = (
    "# a different task with the same id\n- id: same\n  prompt: Name a colour.\n"
    "  checks: [{type: contains, text: red}]\n"
)


def test_duplicate_ids_across_files_name_both_places(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text(ONE)
    (tmp_path / "b.yaml").write_text(OTHER)
    with pytest.raises(UserError) as caught:
        load_task_path(tmp_path)
    message = str(caught.value)
    assert "'same'" in message
    assert f"{tmp_path / 'a.yaml'}:1" in message and f"{tmp_path / 'b.yaml'}:2" in message
    assert main(["tasks", str(tmp_path)]) == 2
    assert "b.yaml:2" in capsys.readouterr().err


def test_duplicate_ids_in_one_file_name_each_line(tmp_path: Path) -> None:
    (tmp_path / "dup.yaml").write_text(ONE + OTHER)
    with pytest.raises(UserError) as caught:
        load_task_path(tmp_path / "dup.yaml")
    assert "dup.yaml:1" in str(caught.value) and "dup.yaml:5" in str(caught.value)


def test_carried_reflections_must_not_be_negative() -> None:
    with pytest.raises(UserError):
        LoopSettings(carried_reflections=-1)


_REFLECTIONS = itertools.count(1)


def _policy(body: dict[str, Any]) -> FakeReply:
    if "You review a failed attempt" in body["messages"][0]["content"]:
        number = next(_REFLECTIONS)  # each reflection its own text (the same one is kept once)
        text = f"Reflection {number}: answer with the number four, written as 4."
        return FakeReply(content=json.dumps({"diagnosis": text, "lesson": ""}))
    return FakeReply(content="five")


@pytest.mark.parametrize(("window", "given"), [(0, 0), (1, 1), (5, 2)])
def test_the_carried_reflection_window_is_what_the_flag_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], window: int, given: int
) -> None:
    """Three failing trials write two reflections; trial 3 is given at most `window` of them."""
    (tmp_path / "t.yaml").write_text(ONE)
    with FakeOpenAIServer(policy=_policy) as server:
        argv = ["run", str(tmp_path / "t.yaml"), "--strategy", "reflexion", "--trials", "3"]
        argv += ["--carried-reflections", str(window), "--json", "--base-url", server.base_url]
        argv += ["--memory", str(tmp_path / "mem"), "--embedding", "hash"]
        main(argv)
        actor_calls = [
            r for r in server.requests if "You review" not in r["messages"][0]["content"]
        ]
    episode = json.loads(capsys.readouterr().out.strip())
    assert [a["trial"] for a in episode["attempts"]] == [1, 2, 3]
    third = json.dumps(actor_calls[-1]["messages"])
    assert third.count("written as 4") == given


@pytest.mark.parametrize(("window", "given"), [(0, 0), (1, 1)])
def test_bench_gives_reflexion_the_window_the_flag_says(
    tmp_path: Path, window: int, given: int
) -> None:
    """The bench's reflexion arm obeys --carried-reflections as `run` does (it used to keep 3)."""
    (tmp_path / "t.yaml").write_text(ONE)
    with FakeOpenAIServer(policy=_policy) as server:
        argv = ["bench", str(tmp_path / "t.yaml"), "--strategies", "reflexion", "--trials", "3"]
        argv += ["--carried-reflections", str(window), "--base-url", server.base_url]
        argv += ["--out", str(tmp_path / "bench"), "--embedding", "hash"]
        assert main(argv) == 0
        actor_calls = [
            r for r in server.requests if "You review" not in r["messages"][0]["content"]
        ]
    assert len(actor_calls) == 3
    third = json.dumps(actor_calls[-1]["messages"])
    assert third.count("written as 4") == given
