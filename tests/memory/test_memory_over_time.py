"""Memory under load and over time: two processes writing one memory, a run killed mid-attempt
resumed, a chroma server shared by two processes, hidden check details kept from every model
message, expiry, and a better lesson superseding the one it replaces."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mulligan.actor import Actor
from mulligan.cli import main
from mulligan.errors import UserError
from mulligan.evaluator import Evaluator
from mulligan.loop import Loop, LoopSettings
from mulligan.memory import HashEmbedding, Memory, ValiditySection
from mulligan.reflector import Reflector
from mulligan.schema import ExactMatchCheck, Lesson, LessonScope, Task
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel
from tests.helpers.chroma_server import chroma_server
from tests.loop.test_reflexion import (
    LESSON,
    capital_policy,
    cli,
    is_reflection,
    plant,
    write,
)

__all__ = ["chroma_server"]  # a fixture


WRITER = """
import sys
from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import Lesson, LessonScope
memory = Memory(sys.argv[1], HashEmbedding())
for n in range(int(sys.argv[3])):
    text = f"writer {sys.argv[2]} lesson {n}: " + " ".join(f"w{sys.argv[2]}x{n}y{k}" for k in range(6))
    memory.keep(Lesson(id=f"{sys.argv[2]}-{n}", text=text, scope=LessonScope(family="f")), persistent=True)
"""


def test_two_processes_writing_one_memory_lose_no_lesson(tmp_path: Path) -> None:
    mem = str(tmp_path / "mem")
    Memory(mem, HashEmbedding()).store.count()  # create it first, as a run would
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, mem, name, "25"], stderr=subprocess.PIPE, text=True
        )
        for name in ("a", "b")
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    stored = Memory(mem, HashEmbedding()).store.all()
    assert len(stored) == 50
    assert {x.id for x in stored} == {f"{w}-{n}" for w in "ab" for n in range(25)}


def test_two_memories_on_one_directory_in_one_process_both_keep_working(tmp_path: Path) -> None:
    """As two Agents on one memory in one process: each sees what the other wrote, and the
    one that reloads the index after the other's write leaves the other's store usable."""
    first, second = (
        Memory(tmp_path / "mem", HashEmbedding()),
        Memory(tmp_path / "mem", HashEmbedding()),
    )
    first.keep(
        Lesson(id="one", text="Convert km to metres.", scope=LessonScope(family="f")),
        persistent=True,
    )
    assert [x.id for x in second.store.all()] == ["one"]  # the second reloads: another wrote
    second.keep(
        Lesson(id="two", text="Answer in metres.", scope=LessonScope(family="f")), persistent=True
    )
    assert {x.id for x in first.store.all()} == {"one", "two"}
    assert {x.id for x in second.store.all()} == {"one", "two"}


FORKED: list[Memory] = []  # the memory a forked child inherits


def in_a_forked_child(n: int) -> str:
    try:
        FORKED[0].store.all()
    except UserError as exc:
        return str(exc)
    return "read"


def test_a_lesson_store_inherited_by_a_forked_process_says_to_open_it_there(
    tmp_path: Path,
) -> None:
    """chromadb's embedded client cannot be used across a fork (it hangs): a pool forked from
    a process holding a memory (an Agent in a global) is told so instead of hanging."""
    memory = Memory(tmp_path / "mem", HashEmbedding())
    lesson = Lesson(id="parent", text="Convert km to metres.", scope=LessonScope(family="f"))
    memory.keep(lesson, persistent=True)
    FORKED[:] = [memory]
    with multiprocessing.get_context("fork").Pool(1) as pool:
        (said,) = pool.map_async(in_a_forked_child, [1]).get(timeout=30)
    assert "opened in another process" in said and "spawn" in said
    assert [x.id for x in memory.store.all()] == ["parent"]  # the parent's keeps working


CRASH_TASKS = """\
- id: first
  family: capitals
  prompt: What is the capital city of Australia? Answer with one word.
  checks: [{type: exact_match, answer: Canberra, name: capital}]
- id: second
  family: capitals
  prompt: Use python to wait, then say the capital city of Australia.
  tools: [python]
  checks: [{type: exact_match, answer: Canberra, name: capital}]
"""


def crash_policy(body: dict[str, Any]) -> FakeReply:
    """Deterministic by content: the second task first runs a slow python call."""
    messages = body["messages"]
    if is_reflection(body):
        return capital_policy(body)
    if "Use python to wait" in messages[1]["content"] and not any(
        m["role"] == "tool" for m in messages
    ):
        return FakeReply(
            content=None,
            tool_calls=[
                {
                    "name": "python",
                    "arguments": {"code": "import time; time.sleep(3); print('slept')"},
                }
            ],
        )
    return capital_policy(body)


def counts(memory_dir: Path) -> tuple[int, int, list[bool]]:
    memory = Memory(memory_dir, HashEmbedding())
    episodes = memory.log.episodes()
    attempts = sum(len(memory.log.episode(e["id"]).attempts) for e in episodes)  # type: ignore[union-attr]
    lessons = sum(len(json.loads(e["lessons_written"])) for e in episodes)
    return attempts, lessons, [bool(e["passed"]) for e in episodes]


def test_a_run_killed_mid_attempt_resumes_to_the_same_end(tmp_path: Path) -> None:
    """The run killed is a child; the whole run and the resume run in this process."""
    tasks = write(tmp_path, "tasks.yaml", CRASH_TASKS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}
    with FakeOpenAIServer(policy=crash_policy) as server:
        whole = cli(server, tmp_path / "whole", "run", str(tasks), "--strategy", "reflexion")
        assert main(whole) == 0
        args = cli(server, tmp_path / "crash", "run", str(tasks), "--strategy", "reflexion")
        process = subprocess.Popen(
            [sys.executable, "-m", "mulligan.cli", *args],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        started = len(server.requests)
        deadline = time.monotonic() + 60
        while not any(
            "Use python" in json.dumps(r["messages"]) and not is_reflection(r)
            for r in server.requests[started:]
        ):
            assert time.monotonic() < deadline, "the run never reached the slow tool call"
            time.sleep(0.05)
        time.sleep(0.8)  # inside the python tool call
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert process.stderr is not None
        run_id = process.stderr.readline().split("run id:")[1].strip()
        assert main([*args, "--resume", run_id]) == 0
        assert server.violations == []  # no orphan tool call was ever sent
    assert counts(tmp_path / "crash") == counts(tmp_path / "whole")
    interrupted = Memory(tmp_path / "crash", HashEmbedding()).log.episodes()[1]
    episode = Memory(tmp_path / "crash", HashEmbedding()).log.episode(interrupted["id"])
    assert episode is not None
    statuses = [r.status for s in episode.attempts[0].steps for r in s.results]
    assert statuses == ["interrupted"]


def lesson_policy(lesson: str, right: str, wrong: str) -> Any:
    """A scripted model that reflects `lesson` and answers right only once it is in view."""

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        if "You review a failed attempt" in messages[0]["content"]:
            return json.dumps({"diagnosis": f"{lesson}.", "lesson": ""})
        return right if lesson in json.dumps(messages) else wrong

    return policy


@pytest.mark.parametrize(("stop", "attempts"), [("honest", 2), ("oracle", 3)])
def test_hidden_check_details_never_reach_any_model_message(
    tmp_path: Path, stop: str, attempts: int
) -> None:
    """Honest: the visibly passing trial 2 is submitted; oracle: the hidden check asks for
    a trial 3, and still nothing hidden reaches a model."""
    secret = "SECRET-EXPECTED-VALUE-9931"
    task = Task(
        id="hidden", family="f", prompt="Say something.",
        checks=[
            ExactMatchCheck(answer="visible", name="visible check"),
            ExactMatchCheck(answer=secret, name="hidden check", visibility="hidden"),
        ],
    )  # fmt: skip
    model = ScriptedModel(policy=lesson_policy("Say the word visible", "visible", "nothing"))
    loop = Loop(
        actor=Actor(model),
        evaluator=Evaluator(),
        settings=LoopSettings(strategy="reflexion-memory", trials=3, stop=stop),
        reflector=Reflector(model),
        memory=Memory(tmp_path / "mem", HashEmbedding()),
    )
    episode = loop.run_episode(task)
    assert len(episode.attempts) == attempts and not episode.passed  # hidden never passes
    assert episode.verdicts[1].checks[0].passed  # the lesson fixed what feedback could show
    sent = json.dumps([call.messages for call in model.calls])
    assert secret not in sent and "hidden check" not in sent
    assert "visible check" in sent  # feedback checks do reach the reflector


def test_reflexion_without_the_store_never_needs_an_embedding(tmp_path: Path) -> None:
    def no_embedding() -> Any:
        raise AssertionError("the lesson store was opened")

    memory = Memory(tmp_path / "mem", no_embedding)
    task = Task(id="t", family="f", prompt="Say yes.", checks=[ExactMatchCheck(answer="yes")])
    model = ScriptedModel(policy=lesson_policy("Answer with the single word yes", "yes", "no"))
    loop = Loop(
        Actor(model),
        Evaluator(),
        LoopSettings(strategy="reflexion", trials=3),
        Reflector(model),
        memory,
    )
    episode = loop.run_episode(task)
    assert episode.passed and len(episode.attempts) == 2
    assert memory.lessons(episode.lessons_written)[0].validity.helped == 1


def test_a_chroma_server_shared_by_two_processes(tmp_path: Path, chroma_server: str) -> None:
    """--memory http://HOST:PORT: the lesson store on a chroma server (started here on loopback)."""
    script = WRITER.replace(
        "Memory(sys.argv[1], HashEmbedding())",
        f"Memory(sys.argv[1], HashEmbedding(), store={chroma_server!r})",
    )
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path / name), name, "10"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    shared = Memory(tmp_path / "reader", HashEmbedding(), store=chroma_server)
    assert shared.store.count() == 20
    found = shared.store.search("writer a lesson 3", 1, family="f")
    assert found and found[0][0].id == "a-3"


def test_expired_lessons_are_not_retrieved(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding(), rules=ValiditySection(ttl_days=30))
    kept = plant(memory, "Answer capital questions with the capital, not the largest city.")
    assert kept.validity.expires_at == pytest.approx(kept.source.created_at + 30 * 86400)
    task = Task(id="q", family="capitals", prompt="capital questions", checks=[])
    assert [lesson.id for lesson in memory.retrieve(task, 3)] == ["planted1"]
    kept.validity.expires_at = time.time() - 1  # as it will be in 30 days
    memory.store.put([kept])
    assert memory.retrieve(task, 3) == []


def test_a_better_lesson_supersedes_the_one_it_replaces_and_a_success_leaves_an_insight(
    tmp_path: Path,
) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    plant(memory, "Answer questions about the capital city with the largest city.")
    diagnosis = "Sydney is not it: the capital is Canberra."
    replacing = json.dumps({"diagnosis": diagnosis, "lesson": LESSON, "replaces": [1]})
    insight = json.dumps({"lesson": "Check capitals against a list, not city size."})

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        first = messages[0]["content"]
        if "You review a failed attempt" in first:
            assert "1. Answer questions about the capital city with the largest city." in first
            return replacing
        if "then solved it" in first:
            return insight
        return "Canberra" if "Canberra" in json.dumps(messages) else "Sydney"

    model = ScriptedModel(policy=policy)
    task = Task(id="capital-au", family="capitals", prompt="What is the capital city of Australia?",
                checks=[ExactMatchCheck(answer="Canberra")])  # fmt: skip
    loop = Loop(
        Actor(model),
        Evaluator(),
        # the hash embedding cannot measure relatedness: no similarity floor here; the planted
        # lesson is unverified, shown as such
        LoopSettings(
            strategy="reflexion-memory", trials=3, min_similarity=0.0, show_candidates=True
        ),
        Reflector(model),
        memory,
    )
    episode = loop.run_episode(task)
    assert episode.passed and len(episode.attempts) == 2
    old = memory.store.get(["planted1"])[0]
    diagnosis, new_id = episode.lessons_written[:2]  # the general lesson replaces the old one
    assert memory.lessons([diagnosis])[0].kind == "diagnosis"
    assert old.validity.status == "superseded" and old.validity.superseded_by == new_id
    assert "planted1" not in episode.attempts[1].lesson_ids  # no longer given
    kinds = {lesson.text: lesson.kind for lesson in memory.store.all()}
    assert kinds["Check capitals against a list, not city size."] == "insight"
    assert kinds[LESSON] == "failure"
