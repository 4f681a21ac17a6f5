"""A crash anywhere in verification while working loses no evidence and counts none twice:
killed while an assigned attempt runs, between logging an attempt and judging it, inside the
transaction that judges it, or the whole process killed mid-session (SIGKILL) and resumed,
the memory ends as an uninterrupted run leaves it."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory, assignment
from mulligan.runs.build import build_loop
from mulligan.schema import Lesson, Task
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel
from tests.cli.test_resume import killed_when, resumed
from tests.memory.helpers import RIGHT, plant, prompt_of, units_tasks

DIAGNOSIS = "Look at the unit the question asks for."


class Crash(BaseException):
    """Stands in for a kill: nothing catches it, and nothing after it runs."""


def state(memory: Memory) -> tuple[Any, ...]:
    """What the memory holds of the candidate's verification, episode ids and times aside."""
    halves = [
        (a.episode_id.rsplit("-", 1)[-1], a.trial, a.shown, a.passed, a.told, a.pair)
        for a in memory.log.assignments_of_lesson("rule")
    ]
    events = Counter(
        (e["event"], e["episode_id"].rsplit("-", 1)[-1], e["trial"])
        for e in memory.log.lesson_events("rule")
    )
    return halves, memory.lessons(["rule"])[0].validity, sorted(events.items())


def model(crash: Any = None) -> ScriptedModel:
    """Right only with the candidate in view; `crash(text)` may raise before a reply."""

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        if "You review a failed attempt" in messages[0]["content"]:
            return json.dumps({"diagnosis": DIAGNOSIS, "lesson": ""})
        text = prompt_of(messages)
        if crash:
            crash(text)
        km = int(text.split("A path is ")[1].split(" km")[0])
        return str(km * 1000) if RIGHT in text else str(km)

    return ScriptedModel(policy=policy)


def session(memory_dir: Path, tasks: list[Task], scripted: ScriptedModel) -> None:
    memory = Memory(memory_dir, HashEmbedding())
    settings = LoopSettings(strategy="reflexion-memory", trials=3, min_similarity=0.0)
    loop = build_loop(scripted, settings, memory=memory)
    for task in tasks:
        loop.run_episode(task, episode_id=f"e-{task.id}")


def planted(memory_dir: Path) -> None:
    plant(Memory(memory_dir, HashEmbedding()), "rule", RIGHT)


def once(condition: Any) -> Any:
    """A crash the first time `condition` holds, never again."""
    fired: list[bool] = []

    def crash(*args: Any) -> None:
        if not fired and condition(*args):
            fired.append(True)
            raise Crash

    return crash


def test_killed_while_an_assigned_attempt_runs(tmp_path: Path) -> None:
    tasks = units_tasks(6)
    planted(tmp_path / "whole")
    session(tmp_path / "whole", tasks, model())
    planted(tmp_path / "crash")
    later = once(lambda text: DIAGNOSIS in text and "A path is 3 km" in text)
    with pytest.raises(Crash):
        session(tmp_path / "crash", tasks, model(later))
    session(tmp_path / "crash", tasks, model())  # resumed: each episode by its id
    crashed, whole = (Memory(tmp_path / d, HashEmbedding()) for d in ("crash", "whole"))
    assert state(crashed) == state(whole)


@pytest.mark.parametrize("where", ["before judging", "inside the judging transaction"])
def test_killed_between_an_attempt_and_its_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    tasks = units_tasks(6)
    planted(tmp_path / "whole")
    session(tmp_path / "whole", tasks, model())
    planted(tmp_path / "crash")
    if where == "before judging":
        judged = assignment.InWorkVerification.judged
        crash = once(lambda episode_id, trial: episode_id == "e-units-3" and trial == 2)

        def killed(self: Any, episode_id: str, trial: int, *rest: Any) -> None:
            crash(episode_id, trial)
            judged(self, episode_id, trial, *rest)

        monkeypatch.setattr(assignment.InWorkVerification, "judged", killed)
    else:
        judge = assignment.judge
        crash = once(lambda lesson, episode_id, trial: episode_id == "e-units-3")

        def half_done(conn: Any, lesson: Lesson, episode_id: str, trial: int, *rest: Any) -> Any:
            events = judge(conn, lesson, episode_id, trial, *rest)  # its writes, then the kill
            crash(lesson, episode_id, trial)
            return events

        monkeypatch.setattr(assignment, "judge", half_done)
    with pytest.raises(Crash):
        session(tmp_path / "crash", tasks, model())
    monkeypatch.undo()
    session(tmp_path / "crash", tasks, model())
    crashed, whole = (Memory(tmp_path / d, HashEmbedding()) for d in ("crash", "whole"))
    assert state(crashed) == state(whole)
    assert state(whole)[1].evidence.pairs >= 2


TASKS = "\n".join(
    f"- id: units-{n}\n  family: units\n  prompt: A path is {n} km long. How long is it in "
    f"metres?\n  checks: [{{type: exact_match, answer: '{n * 1000}', name: answer}}]"
    for n in range(1, 7)
)


class HoldLater:
    """Answers as `model` does; holds the second attempt after a first (the diagnosis in
    view) long enough to SIGKILL the process waiting for it."""

    def __init__(self, hold: bool) -> None:
        self.hold, self.arrived, self.later = hold, threading.Event(), 0

    def __call__(self, body: dict[str, Any]) -> FakeReply:
        messages = body["messages"]
        if "You review a failed attempt" in messages[0]["content"]:
            return FakeReply(content=json.dumps({"diagnosis": DIAGNOSIS, "lesson": ""}))
        text = prompt_of(messages)
        km = int(text.split("A path is ")[1].split(" km")[0])
        reply = FakeReply(content=str(km * 1000) if RIGHT in text else str(km))
        if DIAGNOSIS in text:
            self.later += 1
            if self.hold and self.later == 3:
                self.arrived.set()
                reply.delay = 60.0  # the process is killed long before this is sent
        return reply


def test_a_session_killed_mid_run_and_resumed_ends_as_an_uninterrupted_one(
    tmp_path: Path,
) -> None:
    (tmp_path / "tasks.yaml").write_text(TASKS)

    def argv(server: FakeOpenAIServer, memory: Path, *more: str) -> list[str]:
        return [
            "run", str(tmp_path / "tasks.yaml"), "--strategy", "reflexion-memory", "--trials",
            "3", "--min-similarity", "0", "--base-url", server.base_url, "--memory",
            str(memory), "--embedding", "hash", *more,
        ]  # fmt: skip

    for name in ("whole", "crash"):
        planted(tmp_path / name)
    with FakeOpenAIServer(policy=HoldLater(hold=False)) as server:
        whole = resumed(argv(server, tmp_path / "whole"))
        assert whole.returncode in (0, 1), whole.stderr
    policy = HoldLater(hold=True)
    with FakeOpenAIServer(policy=policy) as server:
        run_id = killed_when(policy, argv(server, tmp_path / "crash"))  # type: ignore[arg-type]
        middle = Memory(tmp_path / "crash", HashEmbedding())
        assert 0 < len(middle.log.assignments_of_lesson("rule")) < 12  # killed mid-session
        done = resumed(argv(server, tmp_path / "crash", "--resume", run_id))
        assert done.returncode in (0, 1), done.stderr
        assert server.violations == []
    crashed, uncut = (Memory(tmp_path / d, HashEmbedding()) for d in ("crash", "whole"))
    halves, validity, events = state(crashed)
    assert (halves, validity) == state(uncut)[:2]
    assert all(count == 1 for _, count in events)  # nothing assigned, judged or paired twice
    assert all(told for *_, told, _ in halves)  # every half judged
    by_status = {e for (e, *_), _ in events}
    assert validity.evidence.pairs >= 2 and "verified" in by_status
