"""Nothing is a rule until verified: a candidate lesson reaches no prompt (unless the
`show_candidates` setting shows it, marked unverified); a validated one does. And a memory
arm shown nothing is the no-memory arm: in a paired study it shares react's trial 1."""

from __future__ import annotations

from pathlib import Path

from mulligan.loop import LoopSettings
from mulligan.runs.build import build_loop
from mulligan.settings.run_config import LoopSection, RunConfig
from mulligan.studies.study import Study
from mulligan.testing import ScriptedModel
from tests.memory.helpers import RIGHT, fresh, plant, prompt_of, units_model, units_tasks


def test_a_candidate_lesson_reaches_no_prompt_until_verified(tmp_path: Path) -> None:
    memory = fresh(tmp_path)
    plant(memory, "rule", RIGHT)
    model = units_model()
    settings = LoopSettings(strategy="memory-frozen", trials=1, min_similarity=0.0)
    (task,) = units_tasks(1)
    episode = build_loop(model, settings, memory=memory).run_episode(task, "e1")
    assert episode.attempts[0].lesson_ids == [] and not episode.passed
    assert all(RIGHT not in prompt_of(call.messages) for call in model.calls)
    # shown only when asked for, and marked as what it is
    shown = LoopSettings(
        strategy="memory-frozen", trials=1, min_similarity=0.0, show_candidates=True
    )
    episode = build_loop(model, shown, memory=memory).run_episode(task, "e2")
    assert episode.attempts[0].lesson_ids == ["rule"] and episode.passed
    assert f"(unverified) {RIGHT}" in prompt_of(model.calls[-1].messages)
    # once validated it reaches the prompt by default, unmarked
    memory.change(memory.lessons(["rule"]), "test:validated", _validate)
    episode = build_loop(model, settings, memory=memory).run_episode(task, "e3")
    assert episode.attempts[0].lesson_ids == ["rule"] and episode.passed
    text = prompt_of(model.calls[-1].messages)
    assert RIGHT in text and "(unverified)" not in text


def _validate(lesson: object) -> list[str]:
    lesson.validity.status = "validated"  # type: ignore[attr-defined]
    return ["status:validated"]


def study(tmp_path: Path, arm: str = "memory-frozen") -> tuple[Study, ScriptedModel]:
    model = units_model()
    config = RunConfig(loop=LoopSection(trials=2, min_similarity=0.0))
    found = Study(
        tasks=units_tasks(2), strategies=["react", arm],
        model_for=lambda strategy: model, memory=fresh(tmp_path), config=config,
    )  # fmt: skip
    return found, model


def test_the_memory_arm_shares_trial_1_when_nothing_passes_the_gate(tmp_path: Path) -> None:
    run, model = study(tmp_path)
    plant(run.memory, "rule", RIGHT)  # a candidate: it passes no gate
    run.memory.log.start_run("r1", run.manifest())
    run.run("r1")
    log = run.memory.log
    react = [log.episode(f"r1:react:{t.id}") for t in units_tasks(2)]
    frozen = [log.episode(f"r1:memory-frozen:{t.id}") for t in units_tasks(2)]
    for mine, theirs in zip(frozen, react, strict=True):
        assert mine is not None and theirs is not None
        assert mine.attempts[0].lesson_ids == []
        assert mine.attempts[0].answer == theirs.attempts[0].answer  # the very same attempt
    # react's two trial 1s, then memory-frozen's trial 2s (with their reflections): no
    # trial 1 of its own
    actor_calls = [c for c in model.calls if "You review" not in str(c.messages[0]["content"])]
    trial_ones = [c for c in actor_calls if "previous attempt" not in prompt_of(c.messages)]
    assert len(trial_ones) == 2


def test_a_memory_arm_shown_something_makes_its_own_trial_1(tmp_path: Path) -> None:
    run, model = study(tmp_path)
    plant(run.memory, "rule", RIGHT, status="validated")
    run.memory.log.start_run("r1", run.manifest())
    run.run("r1")
    for task in units_tasks(2):
        mine = run.memory.log.episode(f"r1:memory-frozen:{task.id}")
        assert mine is not None and mine.attempts[0].lesson_ids == ["rule"] and mine.passed
        react = run.memory.log.episode(f"r1:react:{task.id}")
        assert react is not None and not react.passed


def test_an_on_retry_arm_shares_trial_1_and_shows_its_memory_after_a_failure(
    tmp_path: Path,
) -> None:
    """`memory-frozen-on-retry`: a validated lesson that would change trial 1 is held back
    until trial 1 has failed; trial 1 is react's own (one attempt, shared), trial 2 sees it."""
    run, model = study(tmp_path, "memory-frozen-on-retry")
    plant(run.memory, "rule", RIGHT, status="validated")
    run.memory.log.start_run("r1", run.manifest())
    run.run("r1")
    for task in units_tasks(2):
        mine = run.memory.log.episode(f"r1:memory-frozen-on-retry:{task.id}")
        react = run.memory.log.episode(f"r1:react:{task.id}")
        assert mine is not None and react is not None and not react.passed
        assert mine.attempts[0].lesson_ids == []
        assert mine.attempts[0].answer == react.attempts[0].answer  # the very same attempt
        assert "rule" in mine.attempts[1].lesson_ids and mine.passed
    actor_calls = [c for c in model.calls if "You review" not in str(c.messages[0]["content"])]
    shown = [c for c in actor_calls if RIGHT in prompt_of(c.messages)]
    assert len(actor_calls) == 4 and len(shown) == 2  # 2 shared trial 1s, 2 trial 2s
