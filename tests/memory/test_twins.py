"""Faithfulness twins: a memory arm's retrieved items emptied, shuffled (another family's in
their place) or corrupted (each lesson negated by a fixed rewrite), so a study can tell
whether the actor uses what it is shown."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from mulligan.loop import LoopSettings
from mulligan.memory.twins import negate
from mulligan.runs.build import build_loop
from tests.helpers.arms import every_arm
from tests.memory.helpers import RIGHT, fresh, plant, prompt_of, units_model, units_tasks

OTHER = "Name the capital city, not the largest one."


def run_arm(tmp_path: Path, strategy: str) -> tuple[list[str], str]:
    memory = fresh(tmp_path / strategy)
    plant(memory, "units-rule", RIGHT, status="validated")
    plant(memory, "capitals-rule", OTHER, family="capitals", status="validated")
    model = units_model()
    settings = LoopSettings(strategy=strategy, trials=1, min_similarity=0.0)
    episode = build_loop(model, settings, memory=memory).run_episode(units_tasks(1)[0])
    return episode.attempts[0].lesson_ids, prompt_of(model.calls[-1].messages)


def test_the_shuffled_twin_gets_another_family_s_items(tmp_path: Path) -> None:
    real, real_prompt = run_arm(tmp_path, "memory-frozen")
    twin, twin_prompt = run_arm(tmp_path, "memory-frozen-shuffled")
    assert real == ["units-rule"] and RIGHT in real_prompt
    assert twin == ["capitals-rule"]  # as many items, from the capitals family
    assert OTHER in twin_prompt and RIGHT not in twin_prompt


def test_the_corrupted_twin_shows_each_lesson_turned_against_itself(tmp_path: Path) -> None:
    ids, prompt = run_arm(tmp_path, "memory-frozen-corrupted")
    assert ids == ["units-rule"]  # the same lesson, its text rewritten
    assert "Do not convert the km to metres by multiplying by 1000." in prompt
    assert RIGHT not in prompt


def test_the_empty_twin_keeps_the_place_and_removes_the_content(tmp_path: Path) -> None:
    ids, prompt = run_arm(tmp_path, "memory-frozen-empty")
    assert ids == ["units-rule"] and RIGHT not in prompt and "(empty)" in prompt


def test_the_negation_rule() -> None:
    assert negate("Always check the types. Never index an empty list.") == (
        "Never check the types. Index an empty list."
    )
    assert negate("Do not round early! Avoid globals.") == "Round early! Prefer globals."
    assert negate("Test the edge cases first.") == "Do not test the edge cases first."


def test_every_twin_names_its_real_arm_by_what_it_reads_not_by_name() -> None:
    arms = every_arm()
    twins = [s for s in arms if s.twin]
    assert {s.twin for s in twins} == {"empty", "shuffled", "corrupted"}

    def words(name: str) -> set[str]:
        base, _, options = name.partition("[")
        return {base, *options.rstrip("]").split(",")} - {""}

    for twin in twins:
        (real,) = [
            s for s in arms
            if not s.twin and replace(s, name="", summary="") == replace(twin, name="",
                                                                          summary="", twin=None)
        ]  # fmt: skip
        assert words(twin.name) - {twin.twin} == words(real.name)
