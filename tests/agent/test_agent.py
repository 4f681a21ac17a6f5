"""`Agent`: a model, a memory directory and a strategy held together; `solve` runs one task
through the loop the one builder makes and returns the episode; what it learns stays in the
memory for the next Agent on that directory."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mulligan import Agent
from mulligan.errors import UserError
from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import ExactMatchCheck, Lesson, Task
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel

QUESTION = "What is the capital city of Australia? One word."
LESSON = "Name the capital city, which is often not the largest city."
DIAGNOSIS = "Sydney is the largest city; the capital is Canberra."


def capitals_model() -> ScriptedModel:
    """Answers Sydney until its prompt holds a diagnosis naming Canberra; reflects on a
    failure with that diagnosis and a general lesson."""

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        text = json.dumps(messages)
        if "You review a failed attempt" in text:
            return json.dumps({"diagnosis": DIAGNOSIS, "lesson": LESSON, "tags": []})
        return "Canberra" if "Canberra" in text else "Sydney"

    return ScriptedModel(policy=policy)


def test_importing_mulligan_loads_no_agent_until_it_is_named() -> None:
    code = (
        "import sys, mulligan; before = 'mulligan.agent' in sys.modules; "
        "from mulligan import Agent; print(before, Agent.__module__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["False", "mulligan.agent.agent"], done.stderr


def test_a_prompt_and_its_checks_are_solved_and_the_lesson_kept_for_the_next_agent(
    tmp_path: Path,
) -> None:
    agent = Agent(capitals_model(), memory=tmp_path / "mem", embedding="hash", trials=3)
    episode = agent.solve(QUESTION, checks=[ExactMatchCheck(answer="Canberra")], family="capitals")
    assert [v.passed for v in episode.verdicts] == [False, True]
    assert episode.strategy == "reflexion-memory"  # the default: the agent loop with its memory
    assert episode.run_id == agent.run_id
    written = agent.lessons(episode.lessons_written)
    assert {(x.kind, x.text) for x in written} >= {("failure", LESSON), ("diagnosis", DIAGNOSIS)}
    later = Agent(ScriptedModel(), memory=tmp_path / "mem", embedding="hash")
    stored = [x for x in later.lessons() if x.kind == "failure"]
    assert [(x.text, x.validity.status) for x in stored] == [(LESSON, "candidate")]
    assert stored[0].source.task_id == episode.task_id


def test_the_same_prompt_is_the_same_task_in_every_session(tmp_path: Path) -> None:
    ids = []
    for _ in range(2):
        agent = Agent(ScriptedModel(["Canberra"]), memory=tmp_path / "mem", embedding="hash")
        ids.append(agent.solve(QUESTION, [ExactMatchCheck(answer="Canberra")]).task_id)
    assert ids[0] == ids[1] and ids[0].startswith("what-is-the-capital-city")


def test_a_task_runs_under_the_strategy_and_settings_given(tmp_path: Path) -> None:
    task = Task(id="t", prompt="Say yes.", checks=[ExactMatchCheck(answer="yes")])
    model = ScriptedModel(["no", "no"])
    agent = Agent(model, tmp_path / "mem", "retry", trials=2, embedding="hash")
    episode = agent.solve(task)
    assert (episode.task_id, episode.strategy, len(episode.attempts)) == ("t", "retry", 2)
    assert not episode.passed
    model.assert_done()


def test_an_endpoints_url_is_the_model(tmp_path: Path) -> None:
    with FakeOpenAIServer([FakeReply(content="yes")]) as server:
        agent = Agent(server.base_url, tmp_path / "mem", "react", embedding="hash")
        episode = agent.solve("Say yes.", [ExactMatchCheck(answer="yes")])
    assert episode.passed


def test_a_huge_prompt_is_named_by_a_short_id(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(["yes"]), tmp_path / "mem", "react", embedding="hash")
    episode = agent.solve("y" * 300_000 + " yes?", [ExactMatchCheck(answer="yes")])
    assert episode.passed and len(episode.task_id) < 200


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"trails": 3}, r"Agent\(trails=...\): no such setting"),
        ({"trials": 0}, "trials"),
        ({"strategy": "reflection"}, "unknown strategy 'reflection'"),
        ({"memory": "FILE"}, "is a file, not a directory"),
    ],
)
def test_bad_settings_are_user_errors_before_any_task(
    tmp_path: Path, settings: dict[str, Any], says: str
) -> None:
    (tmp_path / "FILE").write_text("")
    chosen = {"memory": tmp_path / "mem", "embedding": "hash"} | settings
    if chosen["memory"] == "FILE":
        chosen["memory"] = tmp_path / "FILE"
    with pytest.raises(UserError, match=says):
        Agent(ScriptedModel(), **chosen)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"model": 42}, r"Agent\(model=42\): a ChatModel"),
        ({"reflector": 3.5}, r"Agent\(reflector=3.5\): a ChatModel"),
        ({"memory": 42}, r"Agent\(memory=42\): a directory"),
        ({"memory": ""}, r"Agent\(memory=''\): a directory"),
        ({"memory": "  "}, r"Agent\(memory='  '\): a directory"),
        ({"strategy": 5}, r"Agent\(strategy=5\): a strategy's name"),
    ],
)
def test_an_argument_of_the_wrong_kind_is_a_user_error_and_nothing_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: dict[str, Any], says: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # where a default memory would go
    monkeypatch.chdir(tmp_path)
    chosen = {"model": ScriptedModel(), "memory": tmp_path / "mem"} | given
    with pytest.raises(UserError, match=says):
        Agent(**chosen, embedding="hash")
    assert not (tmp_path / "home").exists()
    assert not (tmp_path / "  ").exists()


def test_a_frozen_memory_under_a_strategy_that_writes_it_is_a_user_error(tmp_path: Path) -> None:
    frozen = Memory(tmp_path / "mem", HashEmbedding())
    frozen.freeze()
    with pytest.raises(UserError, match=r"Agent\(memory=.*\): frozen.*reflexion-memory"):
        Agent(capitals_model(), memory=frozen, trials=2)
    reading = Agent(capitals_model(), memory=frozen, strategy="memory-frozen", trials=2)
    episode = reading.solve(QUESTION, [ExactMatchCheck(answer="Canberra")])
    assert [v.passed for v in episode.verdicts] == [False, True]
    assert frozen.store.all() == []


def test_a_store_built_with_another_embedding_is_refused_when_the_agent_is_made(
    tmp_path: Path,
) -> None:
    Memory(tmp_path / "mem", HashEmbedding()).keep(Lesson(id="l1", text=LESSON), persistent=True)
    with pytest.raises(UserError, match="built with the hash-512 embedding"):
        Agent(capitals_model(), memory=tmp_path / "mem", embedding="hash:64")
    assert Memory(tmp_path / "mem", HashEmbedding()).log.episodes() == []


def test_a_bad_task_is_a_user_error(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(), memory=tmp_path / "mem", embedding="hash")
    with pytest.raises(UserError, match="prompt"):
        agent.solve("   ")
    with pytest.raises(UserError, match="carries its own checks"):
        agent.solve(Task(id="t", prompt="x"), [ExactMatchCheck(answer="y")])
    with pytest.raises(UserError, match=r"checks: a list of checks, not ExactMatchCheck"):
        agent.solve("Say yes.", ExactMatchCheck(answer="yes"))  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"Agent.lessons: a list of lesson ids, not str"):
        agent.lessons("a1b2c3")
    with pytest.raises(UserError, match=r"Agent.lessons: a list of lesson ids, not \[5\]"):
        agent.lessons([5])  # type: ignore[list-item]
    assert Memory(tmp_path / "mem", HashEmbedding()).log.episodes() == []


def test_an_unknown_lesson_id_is_refused_by_name_as_memory_show_refuses_it(
    tmp_path: Path,
) -> None:
    Memory(tmp_path / "mem", HashEmbedding()).keep(Lesson(id="l1", text=LESSON), persistent=True)
    agent = Agent(ScriptedModel(), memory=tmp_path / "mem", embedding="hash")
    assert [x.id for x in agent.lessons(["l1"])] == ["l1"]
    where = str(tmp_path / "mem")
    with pytest.raises(UserError) as refused:
        agent.lessons(["l1", "nosuch", "gone"])
    assert str(refused.value) == f"Agent.lessons: no lesson 'nosuch', 'gone' in {where}"
    assert agent.lessons([]) == []


def test_a_lesson_store_on_a_chroma_server_that_is_down_is_a_user_error_naming_it(
    tmp_path: Path,
) -> None:
    with socket.socket() as free:  # a port nothing listens on once it is closed
        free.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{free.getsockname()[1]}"
    memory = Memory(tmp_path / "log", HashEmbedding(), store=url)
    with pytest.raises(UserError, match=rf"lesson store {url}: no chroma server answers there"):
        Agent(capitals_model(), memory=memory)
