"""One run configuration in sections, each settable in mulligan.toml, each value's source shown,
the manifest its dump, and --resume comparing it field by field."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.errors import UserError
from mulligan.llm.fake_server import FakeOpenAIServer, FakeReply
from mulligan.runs.build import actor_settings
from mulligan.runs.lifecycle import check_resume, manifest
from mulligan.settings.loading import load_config
from mulligan.settings.run_config import SECTIONS, RunConfig, every_path

EVERY_SECTION = """\
model = "top-level-model"

[endpoint]
timeout = 33

[actor]
protocol = "text"

[budget]
max_steps = 5

[compression]
keep_recent = 2
fold_to = 0.5

[loop]
trials = 4
stop = "oracle"

[validity]
refute_after = 7

[run]
embedding = "hash"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in ("MULLIGAN_CONFIG", "MULLIGAN_MODEL", "MULLIGAN_EMBEDDING", "MULLIGAN_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("MULLIGAN_PROTOCOL", raising=False)
    here = tmp_path / "project"
    here.mkdir()
    monkeypatch.chdir(here)
    return here


def test_every_section_can_be_set_in_mulligan_toml(project: Path) -> None:
    (project / "mulligan.toml").write_text(EVERY_SECTION)
    config = load_config({})
    assert config.endpoint.model == "top-level-model" and config.endpoint.timeout == 33
    assert config.actor.protocol == "text"
    assert config.budget.max_steps == 5
    assert (config.compression.keep_recent, config.compression.fold_to) == (2, 0.5)
    assert (config.loop.trials, config.loop.stop) == (4, "oracle")
    assert config.validity.refute_after == 7
    assert config.run.embedding == "hash"
    toml = str(project / "mulligan.toml")
    assert config.source_of("budget.max_steps") == f"{toml}:10"
    assert config.source_of("loop.stop") == f"{toml}:18"
    assert config.source_of("endpoint.model") == f"{toml}:1"
    assert {path.partition(".")[0] for path in every_path()} == set(SECTIONS)


def test_flags_over_environment_over_the_file_in_every_section(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "mulligan.toml").write_text(EVERY_SECTION)
    monkeypatch.setenv("MULLIGAN_MAX_STEPS", "6")
    monkeypatch.setenv("MULLIGAN_TRIALS", "2")
    config = load_config({"trials": 5, "no_compression": True, "lesson_ttl_days": 3.0})
    assert (config.budget.max_steps, config.source_of("budget.max_steps")) == (
        6, "$MULLIGAN_MAX_STEPS"
    )  # fmt: skip
    assert (config.loop.trials, config.source_of("loop.trials")) == (5, "--trials")
    assert config.compression.enabled is False
    assert config.source_of("compression.enabled") == "--no-compression"
    assert config.validity.ttl_days == 3.0
    # a budget given anywhere overrides a task's own; the defaults do not
    assert actor_settings(config).forced == ("max_steps",)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[budget]\nmax_stepz = 5\n", r":2: unknown key 'max_stepz' in \[budget\]"),
        ("[budget]\nmax_steps = 0\n", r":2: key 'max_steps'.*at least 1"),
        ('[loop]\nstop = "sometimes"\n', r":2: key 'stop'"),
        ("[nowhere]\nx = 1\n", r":1: unknown key 'nowhere'"),
        ('["budget"]\nmax_steps = 0\n', r":2: key 'max_steps'"),  # a quoted table name
        ("[ 'budget' ]\nmax_steps = 0\n", r":2: key 'max_steps'"),
        ("[budget]\nmax_steps = 1\n[budget]\n", r":3: not valid TOML.*'\[budget\]'.*once"),
    ],
)
def test_a_bad_setting_in_a_section_names_file_line_and_key(
    project: Path, text: str, where: str
) -> None:
    (project / "mulligan.toml").write_text(text)
    with pytest.raises(UserError, match=where):
        load_config({})


def test_the_environment_is_range_checked_as_the_flags_are(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MULLIGAN_CONCURRENCY", "0")
    with pytest.raises(UserError, match="environment variable MULLIGAN_CONCURRENCY"):
        load_config({})


def test_a_mistyped_variable_is_named_with_the_one_meant_and_a_known_one_is_not(
    project: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A MULLIGAN_* variable mulligan does not read would otherwise be ignored in silence."""
    monkeypatch.setenv("MULLIGAN_TRIAL", "5")
    monkeypatch.setenv("MULLIGAN_SANDBOX", "auto")  # read by the box, not a setting
    with caplog.at_level("WARNING", logger="mulligan"):
        config = load_config({})
    assert config.loop.trials != 5
    (warned,) = [r.getMessage() for r in caplog.records]
    assert "MULLIGAN_TRIAL" in warned and "MULLIGAN_TRIALS" in warned
    assert "MULLIGAN_SANDBOX" not in warned


def test_every_variable_the_package_reads_is_known_to_the_check() -> None:
    from mulligan.settings.loading import known_variables

    package = Path(__file__).parents[2] / "mulligan"
    read = {
        name
        for file in package.rglob("*.py")
        for name in re.findall(r"\bMULLIGAN_[A-Z][A-Z_]*[A-Z]\b", file.read_text())
    } - {"MULLIGAN_FIELD_NAME"}  # (a docstring's pattern)
    assert read <= known_variables()


def test_config_show_names_every_setting_and_its_source(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "mulligan.toml").write_text("[budget]\nmax_steps = 5\n")
    assert main(["config", "show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["settings"]
    assert set(shown) == set(every_path())
    assert shown["budget.max_steps"] == {"value": 5, "from": f"{project / 'mulligan.toml'}:2"}
    assert shown["loop.trials"] == {"value": 3, "from": "default"}


def test_the_manifest_is_the_configurations_dump() -> None:
    config = RunConfig.model_validate({"budget": {"max_steps": 4}, "loop": {"trials": 2}})
    made = manifest(config, command="run", suite="x")
    assert made["config"] == config.manifest()
    assert made["config"]["budget"]["max_steps"] == 4 and made["config"]["loop"]["trials"] == 2
    assert "api_key" not in made["config"]["endpoint"]  # never a secret


def test_a_resume_names_the_first_field_that_differs() -> None:
    started = manifest(RunConfig(), command="run", suite="x")
    run = {"manifest": json.dumps(started)}
    check_resume(run, "r1", started, "log")  # the same: continues
    changed = RunConfig.model_validate({"compression": {"keep_recent": 1}})
    with pytest.raises(UserError, match=r"config.compression.keep_recent is 1 here but 3.*--keep"):
        check_resume(run, "r1", manifest(changed, command="run", suite="x"), "log")
    only_in_file = RunConfig.model_validate({"compression": {"fold_to": 0.3}})
    with pytest.raises(UserError, match=r"\[compression\] fold_to in mulligan.toml"):
        check_resume(run, "r1", manifest(only_in_file, command="run", suite="x"), "log")


def test_a_manifest_from_before_the_sections_still_resumes() -> None:
    config = RunConfig()
    old = {
        "command": "run", "suite": "x", "trials": 3, "stop": "honest", "carry": "full",
        "carried_reflections": 3, "min_similarity": 0.35, "protocol": "native",
        "budget": config.manifest()["budget"], "compression": config.manifest()["compression"],
        "self_tests": 0,
    }  # fmt: skip
    run = {"manifest": json.dumps(old)}
    check_resume(run, "r0", manifest(config, command="run", suite="x"), "log")
    longer = RunConfig.model_validate({"loop": {"trials": 5}})
    with pytest.raises(UserError, match=r"config.loop.trials is 5 here but 3.*--trials"):
        check_resume(run, "r0", manifest(longer, command="run", suite="x"), "log")


def test_a_run_with_self_tests_from_before_the_tasks_own_checks_came_first_resumes_as_it_ran() -> (
    None
):
    """Its self-tests decided when to stop: resuming with today's default would change that
    halfway, so it is refused, naming the flag that resumes it as it ran."""
    before = RunConfig.model_validate({"loop": {"self_tests": 3}}).manifest()
    del before["loop"]["own_checks_first"]
    run = {"manifest": json.dumps({"command": "bench", "config": before})}
    today = RunConfig.model_validate({"loop": {"self_tests": 3}})
    with pytest.raises(UserError, match=r"own_checks_first is True here but False.*--no-own"):
        check_resume(run, "r0", manifest(today, command="bench"), "log")
    as_it_ran = RunConfig.model_validate({"loop": {"self_tests": 3, "own_checks_first": False}})
    check_resume(run, "r0", manifest(as_it_ran, command="bench"), "log")


def _run_id(log: Path) -> str:
    import sqlite_utils

    return str(next(iter(sqlite_utils.Database(log)["runs"].rows))["id"])


def test_run_bench_and_solve_refuse_a_resume_with_another_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def refused(argv: list[str]) -> str:
        capsys.readouterr()
        assert main(argv) == 2
        return capsys.readouterr().err

    tasks = tmp_path / "tasks.json"
    four = {"id": "four", "prompt": "2 + 2?", "checks": [{"type": "exact_match", "answer": "4"}]}
    tasks.write_text(json.dumps([four]))
    memory = tmp_path / "memory"
    run = ["run", str(tasks), "--memory", str(memory)]
    with FakeOpenAIServer(policy=lambda body: FakeReply(content="Final Answer: 4")) as server:
        endpoint = ["--base-url", server.base_url, "--model", "fake", "--api-key", "x"]
        main([*run, *endpoint, "--max-steps", "3"])
        run_id = _run_id(memory / "episodes.db")
        assert re.search(
            r"config.budget.max_steps is 4 here but 3",
            refused([*run, *endpoint, "--max-steps", "4", "--resume", run_id]),
        )

        out = tmp_path / "bench"
        bench = ["bench", str(tasks), "--out", str(out)]
        bench += ["--strategies", "react,retry", "--embedding", "hash"]
        main([*bench, *endpoint, "--trials", "2"])
        bench_id = _run_id(out / "memory" / "episodes.db")
        assert re.search(
            r"config.loop.trials is 3 here but 2",
            refused([*bench, *endpoint, "--trials", "3", "--resume", bench_id]),
        )

        project = tmp_path / "project"
        project.mkdir()
        (project / "ok.txt").write_text("no\n")
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        solve = ["solve", "make ok.txt say yes", "--dir", str(project), "--yes"]
        solve += ["--check", "grep -q yes ok.txt", "--memory", str(tmp_path / "solve-memory")]
        solve += ["--strategy", "retry", "--embedding", "hash"]
        main([*solve, *endpoint, "--trials", "1"])
        solve_id = _run_id(tmp_path / "solve-memory" / "episodes.db")
        assert re.search(
            r"config.validity.refute_after is 9 here but 1",
            refused(
                [*solve, *endpoint, "--trials", "1", "--refute-after", "9", "--resume", solve_id]
            ),
        )
