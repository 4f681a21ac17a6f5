"""The memory as a service (recall before an attempt, report after it), in process: what a
client is shown, what a report records for the lessons it was shown, the reflector's
lesson kept as a candidate with its provenance, and bad arguments refused with nothing
stored. The same over MCP, through the SDK's client: test_memory_mcp.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mulligan.agent.memory_service import STRATEGY, MemoryService
from mulligan.errors import EndpointUnreachable, ModelError, UserError
from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.reflector import Reflector
from mulligan.testing import ScriptedModel
from tests.memory.helpers import plant

TASK = "A path is 3 km long. How long is it in metres?"
LESSON = "Convert km to metres by multiplying by 1000."
DIAGNOSIS = "The answer was given in km; the question asks for metres."


def reflector_model() -> ScriptedModel:
    """Writes the diagnosis and the lesson whenever asked to review a failed attempt."""

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        assert "You review a failed attempt" in json.dumps(messages)
        return json.dumps({"diagnosis": DIAGNOSIS, "lesson": LESSON, "tags": [], "replaces": []})

    return ScriptedModel(policy=policy, name="reflector")


def service(
    memory: Memory, model: ScriptedModel | None = None, run_id: str = "mcp-1", **settings: Any
) -> MemoryService:
    chosen = LoopSettings(strategy="reflexion-memory", min_similarity=0.0, **settings)
    reflector = Reflector(model or reflector_model())
    return MemoryService(memory, reflector, chosen, run_id, family="units")


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    return Memory(tmp_path / "mem", HashEmbedding())


def test_recall_shows_validated_lessons_with_their_ids_and_hides_candidates(
    memory: Memory,
) -> None:
    plant(memory, "proven", "Multiply km by 1000 to get metres.", status="validated")
    plant(memory, "unproven", "Metres are km times 1000.", status="candidate")
    plant(memory, "wrong", "Answer in km.", status="refuted")
    found = service(memory).recall(TASK)
    assert [(x["id"], x["status"]) for x in found["lessons"]] == [("proven", "validated")]
    assert found["lessons"][0]["text"] == "Multiply km by 1000 to get metres."
    assert found["attempt"] == 1 and found["diagnoses"] == []
    shown = service(memory, show_candidates=True, run_id="mcp-2").recall(TASK)["lessons"]
    assert {x["id"] for x in shown} == {"proven", "unproven"}


def test_a_recall_repeated_before_its_report_counts_the_lessons_shown_once(
    memory: Memory,
) -> None:
    plant(memory, "proven", LESSON, status="validated")
    server = service(memory)
    first, again = server.recall(TASK), server.recall(TASK)
    assert first == again
    assert memory.lessons(["proven"])[0].validity.retrieved == 1


def test_a_failed_report_is_counted_for_what_was_shown_and_reflected_into_a_candidate(
    memory: Memory,
) -> None:
    plant(memory, "proven", "Read how long the path is in the units asked.", status="validated")
    server = service(memory)
    recalled = server.recall(TASK)
    shown = [x["id"] for x in recalled["lessons"]]
    done = server.report(TASK, "3", False, "expected 3000", shown)
    assert done["recorded"] == "failed" and done["attempt"] == 1
    assert [(x["id"], x["status"]) for x in done["shown"]] == [("proven", "validated")]
    written = {x["kind"]: x for x in done["written"]}
    assert written["failure"]["text"] == LESSON and written["failure"]["status"] == "candidate"
    assert written["diagnosis"]["text"] == DIAGNOSIS
    v = memory.lessons(["proven"])[0].validity
    assert (v.retrieved, v.helped, v.hurt) == (1, 0, 1)
    stored = memory.lessons([written["failure"]["id"]])[0]
    episode = memory.log.episode(recalled_episode(server, recalled))
    assert episode is not None and episode.strategy == STRATEGY
    assert stored.source.episode_id == episode.id and stored.source.trial == 1
    assert [a.answer for a in episode.attempts] == ["3"]
    assert episode.attempts[0].lesson_ids == ["proven"]
    assert episode.verdicts[0].feedback == "expected 3000" and not episode.passed
    assert [x.id for x in memory.store.all()] == ["proven", stored.id]  # not the diagnosis


def recalled_episode(server: MemoryService, recalled: dict[str, Any]) -> str:
    return f"{server.run_id}:{recalled['task_id']}"


def test_the_next_recall_at_the_task_carries_its_diagnosis_and_a_pass_asks_no_reflection(
    memory: Memory,
) -> None:
    model = reflector_model()
    server = service(memory, model)
    server.report(TASK, "3", False, "expected 3000")
    again = server.recall(TASK)
    assert again["attempt"] == 2
    assert [x["text"] for x in again["diagnoses"]] == [DIAGNOSIS]
    assert again["lessons"] == []  # the new lesson is a candidate: not shown before verified
    calls = len(model.calls)
    shown = [x["id"] for x in again["diagnoses"]]
    done = server.report(TASK, "3000", True, "", shown)
    assert done["recorded"] == "passed" and done["written"] == []
    assert len(model.calls) == calls
    episode = memory.log.episode(recalled_episode(server, again))
    assert episode is not None and episode.passed and len(episode.attempts) == 2
    fresh_session = service(memory, run_id="mcp-2").recall(TASK)
    assert fresh_session["attempt"] == 1 and fresh_session["diagnoses"] == []


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"shown": ["proven", "nosuch"]}, "no lesson 'nosuch'"),
        (
            {"shown": [f"n{i}" for i in range(5000)]},
            r"no lesson 'n0', .* 'n4' and 4995 more in \S+;",
        ),
        ({"shown": "proven"}, "shown: a list of lesson ids"),
        ({"task": "  "}, "task: blank"),
        ({"passed": "yes"}, "passed: true or false"),
        ({"answer": None}, "answer: text"),
    ],
)
def test_a_bad_report_is_refused_and_stores_nothing(
    memory: Memory, arguments: dict[str, Any], says: str
) -> None:
    plant(memory, "proven", LESSON, status="validated")
    model = reflector_model()
    server = service(memory, model)
    report: dict[str, Any] = {
        "task": TASK, "answer": "3", "passed": False, "feedback": "no", "shown": ["proven"],
    }  # fmt: skip
    with pytest.raises(UserError, match=says):
        server.report(**(report | arguments))
    assert model.calls == []
    assert memory.log.episodes() == []
    assert memory.lessons(["proven"])[0].validity.hurt == 0
    assert [x.id for x in memory.store.all()] == ["proven"]


def test_a_huge_task_is_named_by_a_short_id_and_the_same_text_by_the_same_one(
    memory: Memory,
) -> None:
    huge = "x" * 200_000 + " " + "7" * 100_000
    server = service(memory)
    first = server.recall(huge)["task_id"]
    assert len(first) < 200
    assert server.report(huge, "no", False)["task_id"] == first
    assert len(service(memory).recall(huge + " more")["task_id"]) < 200


def path_task(km: int) -> str:
    return f"A path is {km} km long. How long is it in metres?"


def test_later_attempts_are_assigned_the_candidate_and_their_reports_are_its_evidence(
    memory: Memory,
) -> None:
    """The client's agent passes exactly when shown the candidate: trial 1 never is; at
    trial 2 each block of two tasks has one attempt with it and one without; each such pair
    helped, and after two it is validated and shown at a new session's first attempt."""
    plant(memory, "rule", LESSON)  # a candidate
    server = service(
        memory, ScriptedModel(policy=lambda m, t: json.dumps({"diagnosis": DIAGNOSIS}))
    )
    arms = []
    for km in range(1, 5):
        first = server.recall(path_task(km))
        assert [x["id"] for x in first["lessons"]] == []  # trial 1: no candidate
        server.report(path_task(km), str(km), False, "expected metres")
        second = server.recall(path_task(km))
        tried = [x for x in second["lessons"] if x["id"] == "rule"]
        assert all(x["status"] == "candidate" and x["assigned"] for x in tried)
        arms.append(bool(tried))
        shown = [x["id"] for x in second["lessons"] + second["diagnoses"]]
        server.report(path_task(km), str(km * 1000) if tried else str(km), bool(tried), "", shown)
    assert arms[0] != arms[1] and arms[2] != arms[3]  # a block of two: one of each
    v = memory.lessons(["rule"])[0].validity
    assert (v.status, v.evidence.pairs, v.evidence.helped) == ("validated", 2, 2)
    later = service(memory, run_id="mcp-2").recall(path_task(9))["lessons"]
    assert [(x["id"], x["status"], x["assigned"]) for x in later] == [("rule", "validated", False)]


def test_an_attempt_that_left_out_its_assigned_candidate_is_no_half_of_a_pair(
    memory: Memory,
) -> None:
    """Its outcome still counts for what it was shown; the other arm waits for a half that
    was made as assigned."""
    plant(memory, "rule", LESSON)
    reviewer = ScriptedModel(policy=lambda m, t: json.dumps({"diagnosis": DIAGNOSIS}))
    server = service(memory, reviewer)
    for km in (1, 2):
        task_id = server.report(path_task(km), str(km), False, "expected metres")["task_id"]
        tried = any(x["id"] == "rule" for x in server.recall(path_task(km))["lessons"])
        server.report(path_task(km), str(km), False, "still km", [])  # shown nothing
        assignment = memory.assignment(f"{server.run_id}:{task_id}", 2)
        assert assignment is not None and assignment.shown == tried
        assert assignment.outcome == ("told nothing" if tried else "failed")
    assert memory.lessons(["rule"])[0].validity.evidence.pairs == 0


@pytest.mark.parametrize("error", [EndpointUnreachable, ModelError])
def test_a_reflector_that_fails_leaves_the_outcome_recorded_and_the_report_says_so(
    memory: Memory, error: type[Exception]
) -> None:
    """Gone (nothing answers) or failing (an error status through every retry)."""
    plant(memory, "proven", LESSON, status="validated")

    def unreachable(messages: list[dict[str, Any]], tools: Any) -> str:
        raise error("endpoint http://127.0.0.1:9/v1 unreachable after 4 tries")

    server = service(memory, ScriptedModel(policy=unreachable))
    done = server.report(TASK, "3", False, "expected 3000", ["proven"])
    assert (done["recorded"], done["written"]) == ("failed", [])
    assert done["reflection"].startswith("failed: endpoint http://127.0.0.1:9/v1 unreachable")
    assert memory.lessons(["proven"])[0].validity.hurt == 1
    episode = memory.log.episode(f"{server.run_id}:{done['task_id']}")
    assert episode is not None and [a.answer for a in episode.attempts] == ["3"]
    answered = service(memory, run_id="mcp-2").report(TASK, "3", False, "expected 3000")
    assert answered["reflection"] == "done" and answered["written"]
    assert service(memory, run_id="mcp-3").report(TASK, "3000", True)["reflection"] == (
        "none: the attempt passed"
    )


class Killed(BaseException):
    """The server process dying where this is raised."""


def test_a_report_cut_short_while_the_reflector_answers_stores_nothing_and_is_counted_once_again(
    memory: Memory,
) -> None:
    """The client never got an answer, so it reports again (to the restarted server): the
    outcome is counted once, with the reflection the second server asked for."""
    plant(memory, "proven", "Read how long the path is in the units asked.", status="validated")

    def dies(messages: list[dict[str, Any]], tools: Any) -> str:
        raise Killed

    with pytest.raises(Killed):
        service(memory, ScriptedModel(policy=dies)).report(TASK, "3", False, "no", ["proven"])
    assert memory.lessons(["proven"])[0].validity.hurt == 0
    assert all(row["trials"] == 0 for row in memory.log.episodes())
    done = service(memory, run_id="mcp-2").report(TASK, "3", False, "no", ["proven"])
    assert {x["kind"] for x in done["written"]} == {"diagnosis", "failure"}
    assert memory.lessons(["proven"])[0].validity.hurt == 1


def test_a_family_that_is_not_text_is_refused(memory: Memory) -> None:
    with pytest.raises(UserError, match="family: text, not int"):
        service(memory).recall(TASK, 5)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="family: text, not list"):
        service(memory).report(TASK, "3", False, "", [], ["units"])  # type: ignore[arg-type]
    assert memory.log.episodes() == []


@pytest.mark.parametrize("status", ["refuted", "retracted", "superseded", "expired"])
def test_a_lesson_recall_never_shows_is_refused_and_nothing_is_stored(
    memory: Memory, status: str
) -> None:
    plant(memory, "gone", "Answer in km.", status=status)
    plant(memory, "proven", LESSON, status="validated")
    model = reflector_model()
    with pytest.raises(UserError, match=rf"shown: lesson 'gone' is {status}: recall never"):
        service(memory, model).report(TASK, "3", False, "no", ["proven", "gone"])
    assert model.calls == [] and memory.log.episodes() == []
    assert [x.validity.hurt for x in memory.lessons(["proven", "gone"])] == [0, 0]


def test_a_lesson_retracted_after_recall_showed_it_at_the_task_is_still_counted(
    memory: Memory,
) -> None:
    plant(memory, "proven", LESSON, status="validated")
    server = service(memory)
    shown = [x["id"] for x in server.recall(TASK)["lessons"]]
    memory.retract("proven")
    done = server.report(TASK, "3", False, "no", shown)
    assert [(x["id"], x["status"]) for x in done["shown"]] == [("proven", "retracted")]
    assert memory.lessons(["proven"])[0].validity.hurt == 1
