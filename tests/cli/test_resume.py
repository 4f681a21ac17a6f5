"""Crash and resume: a reflection in flight is redone, a retrieval counted once, and a
resume that names an unknown run or other arguments is refused before anything starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import (
    Attempt,
    CheckResult,
    Episode,
    Lesson,
    LessonScope,
    LessonSource,
    Task,
    Verdict,
)
from mulligan.testing import FakeOpenAIServer, FakeReply

LESSON = "Recall that the capital of Australia is Canberra, not Sydney; answer with Canberra."
TASKS = """\
- id: capital-au
  family: capitals
  prompt: What is the capital city of Australia? Answer with one word.
  checks:
    - {type: exact_match, answer: Canberra, name: capital}
"""


GENERAL = "Check a capital against the seat of government, not the largest city."
INSIGHT = "Name the seat of government, which is not always the largest city."
INSIGHT_MARK = "then solved it on its next attempt"


def is_reflection(body: dict[str, Any]) -> bool:
    return "You review a failed attempt" in body["messages"][0]["content"]


def answer(body: dict[str, Any]) -> FakeReply:
    knows = any("Canberra" in str(m.get("content")) for m in body["messages"])
    return FakeReply(content="Canberra" if knows else "Sydney")


class HoldFirst:
    """A policy that holds the first request of one kind (signalling it arrived) long
    enough to kill the process waiting for it; every other request is answered at once."""

    def __init__(self, held: str) -> None:
        self.held = held
        self.arrived = threading.Event()
        self.seen = {"reflection": 0, "actor": 0}

    def __call__(self, body: dict[str, Any]) -> FakeReply:
        kind = "reflection" if is_reflection(body) else "actor"
        kind = "insight" if INSIGHT_MARK in body["messages"][0]["content"] else kind
        self.seen[kind] = self.seen.get(kind, 0) + 1
        if kind == "reflection":
            planned = FakeReply(content=json.dumps({"diagnosis": LESSON, "lesson": GENERAL}))
        elif kind == "insight":
            planned = FakeReply(content=json.dumps({"lesson": INSIGHT}))
        else:
            planned = answer(body)
        if kind == self.held and self.seen[kind] == 1:
            self.arrived.set()
            planned.delay = 60.0  # the process is killed long before this reply is sent
        return planned


def command(server: FakeOpenAIServer, memory: Path, *args: str) -> list[str]:
    return [*args, "--base-url", server.base_url, "--memory", str(memory), "--embedding", "hash"]


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}


def killed_when(policy: HoldFirst, argv: list[str]) -> str:
    """Start `mulligan ...`, SIGKILL it when the held request arrives; returns the run id."""
    process = subprocess.Popen(
        [sys.executable, "-m", "mulligan.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    try:
        assert policy.arrived.wait(timeout=120), "the held request never arrived"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert process.stderr is not None
    return process.stderr.readline().split("run id:")[1].strip()


@contextmanager
def run_killed_holding(
    tmp_path: Path, held: str, strategy: str, *more: str
) -> Iterator[tuple[FakeOpenAIServer, HoldFirst, list[str], str]]:
    """A real `mulligan run` over TASKS on the memory `tmp_path/mem`, killed with SIGKILL while
    the first request of kind `held` waits: the fake server (still up), its policy, the run's
    command and its run id."""
    (tmp_path / "tasks.yaml").write_text(TASKS)
    policy = HoldFirst(held)
    with FakeOpenAIServer(policy=policy) as server:
        tasks = str(tmp_path / "tasks.yaml")
        argv = [*command(server, tmp_path / "mem", "run", tasks, "--strategy", strategy), *more]
        yield server, policy, argv, killed_when(policy, argv)


def resumed(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mulligan.cli", *argv],
        capture_output=True, text=True, timeout=120, env=environment(),
    )  # fmt: skip


def test_a_kill_during_reflection_is_redone_on_resume_without_an_extra_trial(
    tmp_path: Path,
) -> None:
    mem = tmp_path / "mem"
    with run_killed_holding(tmp_path, "reflection", "reflexion") as (server, policy, argv, run_id):
        done = resumed([*argv, "--resume", run_id, "--json"])
        assert done.returncode == 0, done.stderr
        assert server.violations == []
    line = json.loads(done.stdout)
    assert line["passed"] is True
    assert [a["answer"] for a in line["attempts"]] == ["Sydney", "Canberra"]  # no extra trial
    assert policy.seen["reflection"] == 2  # the one killed, and the one redone
    memory = Memory(mem, HashEmbedding())
    episode = memory.log.episodes(run_id)[0]
    written = memory.lessons(json.loads(episode["lessons_written"]))
    assert [lesson.text for lesson in written] == [LESSON]
    assert written[0].validity.helped == 1


def test_a_kill_during_the_insight_is_redone_on_resume(tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    with run_killed_holding(tmp_path, "insight", "reflexion-memory") as (_, policy, argv, run_id):
        done = resumed([*argv, "--resume", run_id, "--json"])
        assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout)
    assert [a["answer"] for a in line["attempts"]] == ["Sydney", "Canberra"]
    assert policy.seen == {"actor": 2, "reflection": 1, "insight": 2}
    memory = Memory(mem, HashEmbedding())
    episode = memory.log.episodes(run_id)[0]
    written = memory.lessons(json.loads(episode["lessons_written"]))
    assert [(lesson.kind, lesson.text) for lesson in written] == [
        ("diagnosis", LESSON),
        ("failure", GENERAL),
        ("insight", INSIGHT),
    ]
    stored = {lesson.text for lesson in memory.store.all() if lesson.kind != "case"}
    assert stored == {GENERAL, INSIGHT}


def test_a_kill_during_an_attempt_counts_its_retrieval_once(tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    planted = Lesson(
        id="planted",
        text=LESSON,
        scope=LessonScope(family="capitals"),
        source=LessonSource(task_id="elsewhere", model="human"),
    )
    Memory(mem, HashEmbedding()).keep(planted, persistent=True)
    more = ["--min-similarity", "0"]  # the hash embedding cannot measure relatedness
    more += ["--show-candidates"]  # the planted lesson is unverified
    with run_killed_holding(tmp_path, "actor", "reflexion-memory", *more) as (_, _, argv, run_id):
        done = resumed([*argv, "--resume", run_id, "--json"])
        assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout)
    assert [a["answer"] for a in line["attempts"]] == ["Canberra"]
    memory = Memory(mem, HashEmbedding())
    lesson = memory.lessons(["planted"])[0]
    assert lesson.validity.retrieved == 1 and lesson.validity.helped == 1
    events = [e["event"] for e in memory.log.lesson_events("planted")]
    assert events == ["created", "retrieved", "helped"]
    assert memory.store.get(["planted"])[0].validity == lesson.validity


def test_resume_with_an_unknown_run_id_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tasks.yaml").write_text(TASKS)
    tasks = str(tmp_path / "tasks.yaml")
    with FakeOpenAIServer(policy=answer) as server:
        fresh = tmp_path / "fresh"
        assert main(command(server, fresh, "run", tasks, "--resume", "nosuchrun")) == 2
        assert not fresh.exists()
        err = capsys.readouterr().err
        assert "nosuchrun" in err and len(err.strip().splitlines()) == 1
        out = tmp_path / "bench"
        argv = ["bench", tasks, "--out", str(out), "--resume", "nosuchrun"]
        assert main([*argv, "--base-url", server.base_url, "--embedding", "hash"]) == 2
        assert not out.exists()
        assert "nosuchrun" in capsys.readouterr().err
        used = tmp_path / "used"
        assert main(command(server, used, "run", tasks)) == 1  # ran; the task failed
        before = logged(used)
        capsys.readouterr()
        assert main(command(server, used, "run", tasks, "--resume", "nosuchrun")) == 2
        err = capsys.readouterr().err
        assert "nosuchrun" in err and len(err.strip().splitlines()) == 1
        assert logged(used) == before
        assert len(server.requests) == 1  # only the real run asked the model


def logged(memory: Path) -> tuple[list[Any], list[Any]]:
    log = Memory(memory, HashEmbedding()).log
    return log.runs(), log.episodes()


def run_id_of(err: str) -> str:
    return err.split("run id:")[1].split()[0]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (["--trials", "2"], "trials"),
        (["--strategy", "retry"], "strateg"),
        (["--model", "other-model"], "model"),
        (["--max-steps", "3"], "max_steps"),
        (["--seed", "7"], "seed"),
        (["--compress-at", "900"], "compression.threshold_tokens"),
        (["--protocol", "text"], "protocol"),
        (["--stop", "oracle"], "stop"),
    ],
)
def test_resume_with_other_arguments_than_the_run_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: list[str], field: str
) -> None:
    (tmp_path / "tasks.yaml").write_text(TASKS)
    tasks = str(tmp_path / "tasks.yaml")
    mem = tmp_path / "mem"
    base = ["--strategy", "reflexion", "--trials", "3", "--model", "fake-model"]
    with FakeOpenAIServer(policy=answer) as server:
        assert main(command(server, mem, "run", tasks, *base)) == 1  # ran; the task failed
        run_id = run_id_of(capsys.readouterr().err)
        asked = len(server.requests)
        before = logged(mem)
        argv = command(server, mem, "run", tasks, *base, *change, "--resume", run_id)
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert field in err and run_id in err and len(err.strip().splitlines()) == 1
        assert len(server.requests) == asked
        assert logged(mem) == before
        # the same arguments resume (a finished run: nothing left to do)
        assert main(command(server, mem, "run", tasks, *base, "--resume", run_id)) == 1
        assert len(server.requests) == asked


def test_bench_resume_with_other_strategies_or_suite_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tasks.yaml").write_text(TASKS)
    (tmp_path / "other.yaml").write_text(TASKS.replace("capital-au", "capital-au-2"))
    out = tmp_path / "out"
    with FakeOpenAIServer(policy=answer) as server:
        endpoint = ["--base-url", server.base_url, "--embedding", "hash", "--model", "m"]
        first = ["bench", str(tmp_path / "tasks.yaml"), "--out", str(out), "--strategies"]
        assert main([*first, "react,retry", *endpoint]) == 0
        run_id = run_id_of(capsys.readouterr().err)
        assert main([*first, "react", *endpoint, "--resume", run_id]) == 2
        assert "strategies" in capsys.readouterr().err
        other = ["bench", str(tmp_path / "other.yaml"), "--out", str(out), "--strategies"]
        assert main([*other, "react,retry", *endpoint, "--resume", run_id]) == 2
        assert "suite" in capsys.readouterr().err
        assert main([*first, "react,retry", *endpoint, "--resume", run_id]) == 0


@pytest.mark.parametrize("command_name", ["run", "bench"])
def test_resume_after_the_task_file_was_edited_is_refused_naming_the_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command_name: str
) -> None:
    """A run scored half with the old checks and half with the new ones is no run at all."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS)
    mem = tmp_path / "mem"
    where = ["--memory", str(mem)] if command_name == "run" else ["--out", str(tmp_path / "out")]
    flags = ["--strategy" if command_name == "run" else "--strategies", "retry", "--trials", "2"]
    with FakeOpenAIServer(policy=answer) as server:
        endpoint = ["--base-url", server.base_url, "--embedding", "hash", "--model", "m"]
        argv = [command_name, str(tasks), *flags, *endpoint, *where]
        main(argv)
        run_id = run_id_of(capsys.readouterr().err)
        asked = len(server.requests)
        tasks.write_text(TASKS.replace("answer: Canberra", "answer: Sydney"))
        assert main([*argv, "--resume", run_id]) == 2
        err = capsys.readouterr().err
        assert "capital-au" in err and "changed" in err and len(err.strip().splitlines()) == 1
        assert len(server.requests) == asked
        tasks.write_text(TASKS)  # restored as it was: the run resumes
        assert main([*argv, "--resume", run_id]) in (0, 1)


def test_a_run_logged_before_its_tasks_were_recorded_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An older run's manifest holds no record of its tasks' content: nothing to compare."""
    import sqlite3

    (tmp_path / "tasks.yaml").write_text(TASKS)
    mem = tmp_path / "mem"
    with FakeOpenAIServer(policy=answer) as server:
        argv = command(server, mem, "run", str(tmp_path / "tasks.yaml"), "--model", "m")
        main(argv)
        run_id = run_id_of(capsys.readouterr().err)
        with sqlite3.connect(mem / "episodes.db") as db:
            (text,) = db.execute("select manifest from runs where id = ?", [run_id]).fetchone()
            older = json.loads(text)
            assert older.pop("task_digests")
            db.execute("update runs set manifest = ? where id = ?", [json.dumps(older), run_id])
        assert main([*argv, "--resume", run_id]) in (0, 1)


def test_help_or_harm_a_crash_left_uncounted_is_counted_once_on_resume(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    planted = Lesson(id="planted", text=LESSON, scope=LessonScope(family="capitals"))
    memory.keep(planted, persistent=True)
    task = Task(id="capital-au", family="capitals", prompt="capital of Australia?", checks=[])
    episode = Episode(id="e1", task_id=task.id, strategy="reflexion-memory")
    memory.start_episode(episode)
    given = memory.retrieve(task, 3, episode_id="e1", trial=1)
    assert [lesson.id for lesson in given] == ["planted"]
    attempt = Attempt(task_id=task.id, trial=1, lesson_ids=["planted"])
    seen = CheckResult(type="exact_match", name="capital", passed=True, score=1.0)
    verdict = Verdict(passed=True, score=1.0, checks=[seen])  # counted on visible checks
    memory.log.log_attempt(episode, attempt, verdict)  # then: killed
    for _ in range(2):  # resumed twice: counted once
        resumed_episode = Memory(tmp_path / "mem", HashEmbedding()).resume_episode("e1")
        assert resumed_episode is not None and resumed_episode.passed
    assert memory.retrieve(task, 3, episode_id="e1", trial=1)[0].id == "planted"
    lesson = memory.lessons(["planted"])[0]
    assert (lesson.validity.retrieved, lesson.validity.helped) == (1, 1)
    assert memory.store.get(["planted"])[0].validity == lesson.validity
