"""Cases beside lessons: an attempt whose visible checks passed is kept as a case (its
prompt, its answer, what the visible checks said; nothing hidden); a case-reading arm sees
the most similar one as a worked example; cases are listed, shown, retracted, exported and
imported as lessons are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.runs.build import build_loop
from mulligan.schema import ContainsCheck, ExactMatchCheck, Lesson
from tests.memory.helpers import fresh, prompt_of, units_model, units_tasks

SECRET = "SECRET-7731"


def learn_a_case(memory: Memory) -> Lesson:
    """reflexion-memory passes units-1's visible check; a hidden check it fails holds SECRET."""
    (task,) = units_tasks(1)
    hidden = ContainsCheck(text=SECRET, name=f"{SECRET}-check", visibility="hidden", reveal=True)
    task = task.model_copy(update={"checks": [*task.checks, hidden]})
    settings = LoopSettings(strategy="reflexion-memory", trials=2, min_similarity=0.0)
    episode = build_loop(units_model(right_when=None), settings, memory=memory).run_episode(task)
    assert len(episode.attempts) == 1 and not episode.passed  # visible passed, hidden failed
    (case,) = [x for x in memory.store.all() if x.kind == "case"]
    return case


def test_a_passing_attempt_is_kept_as_a_case_holding_no_hidden_check_text(
    tmp_path: Path,
) -> None:
    memory = fresh(tmp_path)
    case = learn_a_case(memory)
    assert case.text == units_tasks(1)[0].prompt and case.case is not None
    assert case.case.answer == "1000" and case.scope.task_id == "units-1"
    assert SECRET not in case.model_dump_json()
    assert SECRET not in str(memory.log.lessons([case.id])[0].model_dump_json())


def test_no_case_from_an_attempt_whose_visible_checks_failed_or_that_has_none(
    tmp_path: Path,
) -> None:
    memory = fresh(tmp_path)
    (task,) = units_tasks(1)
    settings = LoopSettings(strategy="reflexion-memory", trials=1, min_similarity=0.0)
    build_loop(units_model(), settings, memory=memory).run_episode(task)  # answers in km
    hidden_only = task.model_copy(
        update={"id": "h", "checks": [ExactMatchCheck(answer="1000", visibility="hidden")]}
    )
    build_loop(units_model(right_when=None), settings, memory=memory).run_episode(hidden_only)
    assert [x for x in memory.store.all() if x.kind == "case"] == []


def test_a_case_reading_arm_sees_the_most_similar_case_as_a_worked_example(
    tmp_path: Path,
) -> None:
    memory = fresh(tmp_path)
    case = learn_a_case(memory)
    model = units_model(right_when="The answer that passed its checks")
    task = units_tasks(2)[1]
    for strategy, shown in (("memory-frozen", False), ("memory-frozen-cases", True)):
        settings = LoopSettings(strategy=strategy, trials=1, min_similarity=0.0)
        episode = build_loop(model, settings, memory=memory).run_episode(task)
        assert (episode.attempts[0].lesson_ids == [case.id]) is shown
        assert episode.passed is shown
    text = prompt_of(model.calls[-1].messages)
    assert "A worked example from memory" in text and "> 1000" in text
    assert "> A path is 1 km long." in text  # the earlier task, quoted


def test_cases_are_listed_shown_retracted_exported_and_imported_like_lessons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = fresh(tmp_path)
    case = learn_a_case(memory)
    where = ["--memory", str(tmp_path / "mem")]
    assert main(["memory", "list", *where]) == 0
    assert case.id in capsys.readouterr().out
    assert main(["memory", "stats", *where]) == 0
    assert "by kind: case 1" in capsys.readouterr().out
    assert main(["memory", "show", case.id, *where]) == 0
    shown = capsys.readouterr().out
    assert "case" in shown and "answer that passed" in shown and "1000" in shown
    out = tmp_path / "cases.jsonl"
    assert main(["memory", "export", "--out", str(out), *where]) == 0
    other = tmp_path / "other"
    assert main(["memory", "import", str(out), "--memory", str(other), "--embedding", "hash"]) == 0
    (back,) = [x for x in Memory(other, HashEmbedding()).store.all() if x.kind == "case"]
    assert back.model_dump(exclude={"validity"}) == case.model_dump(exclude={"validity"})
    assert main(["memory", "retract", case.id, *where]) == 0
    later = build_loop(
        units_model(),
        LoopSettings(strategy="memory-frozen-cases", trials=1, min_similarity=0.0),
        memory=Memory(tmp_path / "mem", HashEmbedding()),
    ).run_episode(units_tasks(2)[1])
    assert later.attempts[0].lesson_ids == []  # retracted: shown to no one


def test_an_import_with_negative_evidence_is_refused_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lesson = Lesson(id="x", text="Check the types.")
    record = lesson.model_dump(mode="json")
    record["validity"]["evidence"]["hurt"] = -2
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record) + "\n")
    argv = ["memory", "import", str(path), "--memory", str(tmp_path / "m"), "--trust"]
    assert main([*argv, "--embedding", "hash"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:1" in err and "validity.evidence.hurt" in err
