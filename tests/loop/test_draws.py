"""Draws that differ: `warming` climbs the temperature ladder one rung an attempt (as sent to
the endpoint), `select-diverse` spreads its candidates over the ladder and takes the prompt
variants in turn, `escalate` hands the later attempts to a stronger model; the other
strategies draw as before, at the run's temperature, with the actor's model."""

from __future__ import annotations

from pathlib import Path

import pytest

from mulligan import strategies
from mulligan.errors import UserError
from mulligan.llm.base import Message
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.prompts import render
from mulligan.report.stats import collect
from mulligan.report.tables import model_rows
from mulligan.runs.build import build_loop
from mulligan.schema import Episode, ExactMatchCheck, Task
from mulligan.settings.run_config import LoopSection, RunConfig
from mulligan.studies.study import Study
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel

CAPITAL = Task(
    id="capital-au",
    family="capitals",
    prompt="What is the capital of Australia?",
    checks=[ExactMatchCheck(answer="Canberra")],
)
PLAN = render("approach_plan")


def sent_temperatures(strategy: str, trials: int, ladder: list[float]) -> list[float]:
    """The temperature of every request the endpoint got, each attempt answering wrong."""
    replies = [FakeReply(content="Sydney") for _ in range(trials)]
    with FakeOpenAIServer(replies) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, temperature=0.7)
        settings = LoopSettings(strategy=strategy, trials=trials, temperatures=ladder)
        episode = build_loop(model, settings).run_episode(CAPITAL)
        assert len(episode.attempts) == trials
        assert [a.drawn_temperature for a in episode.attempts] == [
            r["temperature"] if strategy == strategies.WARMING.name else None
            for r in server.requests
        ]
        return [r["temperature"] for r in server.requests]


def test_warming_sends_each_attempt_one_rung_higher_and_stays_at_the_top() -> None:
    assert sent_temperatures(strategies.WARMING.name, 4, [0.1, 0.6, 1.1]) == [0.1, 0.6, 1.1, 1.1]


def test_retry_sends_the_run_temperature_every_time() -> None:
    assert sent_temperatures(strategies.RETRY.name, 3, [0.1, 0.6, 1.1]) == [0.7, 0.7, 0.7]


def asked_to_plan(messages: list[Message]) -> bool:
    return any(PLAN in str(m.get("content")) for m in messages)


def draw(strategy: str, trials: int, ladder: list[float]) -> tuple[Episode, ScriptedModel]:
    model = ScriptedModel(policy=lambda messages, tools: "Sydney")
    settings = LoopSettings(strategy=strategy, trials=trials, temperatures=ladder, draw_all=True)
    return build_loop(model, settings).run_episode(CAPITAL), model


def test_select_diverse_spreads_its_candidates_over_the_ladder_and_the_prompt_variants() -> None:
    episode, model = draw(strategies.SELECT_DIVERSE.name, 5, [0.2, 0.9, 1.5])
    assert [c.asked_temperature for c in model.calls] == [0.2, 0.9, 1.5, 0.2, 0.9]
    assert [asked_to_plan(c.messages) for c in model.calls] == [False, True, False, True, False]
    assert [a.approach for a in episode.attempts] == [None, "approach_plan"] * 2 + [None]
    assert episode.selection is not None  # one of them is submitted, as select submits


@pytest.mark.parametrize("name", [strategies.SELECT.name, strategies.RETRY.name])
def test_the_other_strategies_draw_at_the_run_temperature_with_the_task_alone(name: str) -> None:
    episode, model = draw(name, 3, [0.2, 0.9, 1.5])
    assert [c.asked_temperature for c in model.calls] == [None] * 3
    assert not any(asked_to_plan(c.messages) for c in model.calls)
    assert [(a.drawn_temperature, a.approach) for a in episode.attempts] == [(None, None)] * 3


def test_a_strategy_drawn_differently_makes_its_own_trial_1() -> None:
    """In a paired study the shared trial 1 was drawn at the run's temperature."""
    shared = {s.name for s in strategies.REGISTRY.values() if s.shares_first_attempt}
    assert {strategies.RETRY.name, strategies.SELECT.name} <= shared
    assert not {strategies.WARMING.name, strategies.SELECT_DIVERSE.name} & shared


def test_the_ladder_is_read_comma_separated_and_each_rung_checked() -> None:
    assert LoopSettings(temperatures="0, 0.5,1").temperatures == [0.0, 0.5, 1.0]  # type: ignore[arg-type]
    assert LoopSettings(temperatures=["0.2,0.4", "0.8"]).temperatures == [0.2, 0.4, 0.8]  # type: ignore[list-item]
    for wrong, said in (([0.5, 2.5], "not 2.5"), ([], "at least 1")):
        with pytest.raises(UserError, match=f"temperatures: .*{said}"):
            LoopSettings(temperatures=wrong)


def test_escalate_hands_the_later_attempts_to_the_stronger_model(tmp_path: Path) -> None:
    """Two attempts of the actor's model fail, the stronger one's third passes; the report
    counts each model's tokens under its name."""
    small = ScriptedModel(policy=lambda messages, tools: "Sydney", name="small")
    big = ScriptedModel(["Canberra"], name="big")
    memory = Memory(tmp_path / "mem", HashEmbedding())
    study = Study(
        tasks=[CAPITAL], strategies=[strategies.ESCALATE.name], model_for=lambda s: small,
        memory=memory, config=RunConfig(loop=LoopSection(trials=3, escalate_after=2)),
        escalation=big,
    )  # fmt: skip
    memory.log.start_run("r", study.manifest())
    study.run("r")
    big.assert_done()
    logged = memory.log.episode(f"r:{strategies.ESCALATE.name}:{CAPITAL.id}")
    assert logged is not None and logged.passed
    assert [a.model for a in logged.attempts] == ["small", "small", "big"]
    (escalated,) = collect(memory.log, "r").strategies
    assert set(escalated.by_model) == {"small", "big"}
    assert escalated.by_model["big"] == logged.attempts[2].usage_by_role["actor"]
    header, rows = model_rows(collect(memory.log, "r"))
    assert header == ["strategy", "big tok/task", "small tok/task"] and len(rows) == 1


def test_escalate_without_a_stronger_model_is_refused() -> None:
    with pytest.raises(UserError, match="--escalate-to"):
        build_loop(ScriptedModel(), LoopSettings(strategy=strategies.ESCALATE.name))


def test_escalate_with_no_trial_left_for_the_stronger_model_is_refused_by_the_settings() -> None:
    """The Python API refuses what the command line refuses: escalate would run as retry."""
    with pytest.raises(UserError, match=r"--escalate-after 2 .*--trials 2 leaves it none"):
        LoopSettings(strategy=strategies.ESCALATE.name, trials=2, escalate_after=2)
    assert LoopSettings(strategy=strategies.RETRY.name, trials=2, escalate_after=2).trials == 2
    assert LoopSettings(strategy=strategies.ESCALATE.name, trials=3, escalate_after=2).trials == 3


def test_a_stronger_model_is_connected_only_for_a_strategy_that_escalates() -> None:
    """A settings file's `[escalation] model` does not start (or fail to find) a model for a
    study none of whose strategies escalates."""
    from mulligan.cli.pipeline import RunRequest, connect_escalation_model

    config = RunConfig.model_validate({"escalation": {"model": "local:/nowhere/big.gguf"}})
    actor = OpenAIChatModel("small", base_url="http://127.0.0.1:9/v1")
    plain = RunRequest(command="bench", strategies=["react", "retry"], selection={})
    assert connect_escalation_model(config, plain, actor) is None
    escalating = RunRequest(command="bench", strategies=["escalate"], selection={})
    with pytest.raises(UserError, match=r"^--escalate-to local:/nowhere/big.gguf: no such file"):
        connect_escalation_model(config, escalating, actor)


@pytest.mark.parametrize("name", [strategies.WARMING.name, strategies.SELECT_DIVERSE.name])
def test_in_a_paired_study_a_strategy_drawn_differently_draws_its_own_trial_1(
    tmp_path: Path, name: str
) -> None:
    """react's trial 1 (at the run's temperature) is offered to every strategy of the study;
    one whose first draw is at the ladder's first rung makes its own."""
    model = ScriptedModel(policy=lambda messages, tools: "Sydney")
    memory = Memory(tmp_path / "mem", HashEmbedding())
    study = Study(
        tasks=[CAPITAL], strategies=[strategies.REACT.name, name], model_for=lambda s: model,
        memory=memory,
        config=RunConfig(loop=LoopSection(trials=2, temperatures=[0.1, 0.9], draw_all=True)),
    )  # fmt: skip
    memory.log.start_run("r", study.manifest())
    study.run("r")
    logged = memory.log.episode(f"r:{name}:{CAPITAL.id}")
    assert logged is not None
    assert [a.drawn_temperature for a in logged.attempts] == [0.1, 0.9]
    assert [c.asked_temperature for c in model.calls] == [None, 0.1, 0.9]
