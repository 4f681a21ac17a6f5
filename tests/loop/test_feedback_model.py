"""A feedback model of its own (`--reflector-model`, `[reflector]`): the reflector, the
self-test writer and a selection's input writer call it, never the actor's model, and its
tokens are counted under their own roles; its endpoint and key default to the run's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mulligan.llm.connect import connect_second
from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.report.stats import collect
from mulligan.runs.build import build_loop
from mulligan.schema import ExactMatchCheck, PythonTestsCheck, Task, Usage
from mulligan.settings.loading import load_config
from mulligan.settings.run_config import LoopSection, RunConfig
from mulligan.studies.study import Study
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel

YES = Task(id="t", family="f", prompt="Say yes.", checks=[ExactMatchCheck(answer="yes")])
DOUBLE = Task(
    id="double", family="code", prompt="Write f(x) that returns twice x.",
    checks=[PythonTestsCheck(tests="assert f(3) == 6", entry_point="f", visibility="hidden")],
)  # fmt: skip


def test_the_reflector_calls_the_feedback_model_under_its_own_role() -> None:
    actor = ScriptedModel(["no", "yes"], name="small")
    feedback = ScriptedModel([json.dumps({"diagnosis": "Say yes.", "lesson": ""})], name="big")
    loop = build_loop(actor, LoopSettings(strategy="reflexion", trials=2), reflector=feedback)
    episode = loop.run_episode(YES)
    actor.assert_done()
    feedback.assert_done()
    assert episode.passed and len(actor.calls) == 2 and len(feedback.calls) == 1
    reflected = episode.attempts[0].usage_by_role["reflector"]
    assert reflected.total_tokens > 0 and "reflector" not in episode.attempts[1].usage_by_role


def test_selection_inputs_and_self_tests_come_from_the_feedback_model(tmp_path: Path) -> None:
    code = "```python\ndef f(x):\n    return x * 2\n```"
    actor = ScriptedModel([code], name="small")  # it passes every visible check: drawing stops
    feedback = ScriptedModel(
        ["```python\nassert f(1) == 2\n```", json.dumps({"inputs": [[1], [4]]})], name="big"
    )
    memory = Memory(tmp_path / "mem", HashEmbedding())
    study = Study(
        tasks=[DOUBLE], strategies=["select"], model_for=lambda s: actor, memory=memory,
        config=RunConfig(loop=LoopSection(trials=2, self_tests=1, probes="always")),
            reflector=feedback,
    )  # fmt: skip
    study.memory.log.start_run("r", study.manifest())
    study.run("r")
    actor.assert_done()
    feedback.assert_done()
    (stats,) = collect(memory.log, "r").strategies
    assert set(stats.by_role) == {"actor", "tester", "selector"}
    assert all(stats.by_role[role].total_tokens > 0 for role in stats.by_role)
    assert stats.solved_by_trial[-1] == 1


def test_the_feedback_model_is_configured_by_flag_or_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mulligan.toml").write_text('[reflector]\nmodel = "big"\napi_key = "sk-9999"\n')
    config = load_config({}, config_path=tmp_path / "mulligan.toml")
    assert config.reflector.model == "big" and config.reflector.api_key == "sk-9999"
    recorded = config.manifest()["reflector"]  # the model is recorded, its key never is
    assert recorded["model"] == "big" and "api_key" not in recorded
    assert "sk-9999" not in json.dumps(config.manifest())
    flagged = load_config({"reflector_model": "bigger"}, config_path=tmp_path / "mulligan.toml")
    assert flagged.reflector.model == "bigger"
    assert flagged.source_of("reflector.model") == "--reflector-model"
    assert connect_second(RunConfig().reflector, RunConfig().endpoint) is None


def test_the_feedback_model_reaches_its_endpoint_and_is_metered() -> None:
    with FakeOpenAIServer(policy=lambda body: FakeReply(content="ok")) as server:
        config = RunConfig.model_validate(
            {"endpoint": {"base_url": server.base_url, "model": "small"},
             "reflector": {"model": "big"}}
        )  # fmt: skip
        model = connect_second(config.reflector, config.endpoint)
        assert model is not None and model.name == "big" and model.temperature == 0.0
        reply = model.chat([{"role": "user", "content": "hi"}])
    assert reply.text == "ok" and reply.usage != Usage()
    assert server.requests[-1]["model"] == "big"
