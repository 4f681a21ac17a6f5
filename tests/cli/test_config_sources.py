"""A per-user config file, and `mulligan config show` with each value's source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.defaults import user_config_path
from mulligan.errors import UserError
from mulligan.settings.loading import load_config


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A user config folder (XDG) and a project folder (the current directory)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("MULLIGAN_CONFIG", raising=False)
    for name in ("MULLIGAN_EMBEDDING", "MULLIGAN_TIMEOUT", "MULLIGAN_MEMORY", "MULLIGAN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    user = tmp_path / "xdg" / "mulligan" / "config.toml"
    user.parent.mkdir(parents=True)
    return user, project / "mulligan.toml"


def test_the_user_file_lives_in_the_platform_config_folder(places: tuple[Path, Path]) -> None:
    user, _ = places
    assert user_config_path() == user


def test_flags_over_environment_over_project_over_user_over_defaults(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    user, project = places
    user.write_text('model = "user-model"\ntimeout = 30\nembedding = "hash"\nmemory = "/u"\n')
    project.write_text('timeout = 60\nmemory = "/p"\n')
    monkeypatch.setenv("MULLIGAN_MEMORY", "/env")
    config = load_config({"embedding": "minilm"})
    endpoint, run = config.endpoint, config.run
    assert (endpoint.model, endpoint.timeout, run.memory, run.embedding) == (
        "user-model", 60.0, "/env", "minilm"
    )  # fmt: skip
    sources = {
        path: config.source_of(path)
        for path in ("endpoint.model", "endpoint.timeout", "run.memory", "run.embedding")
    }
    assert sources == {
        "endpoint.model": f"{user}:1",
        "endpoint.timeout": f"{project}:1",
        "run.memory": "$MULLIGAN_MEMORY",
        "run.embedding": "--embedding",
    }
    assert load_config({}).actor.protocol == "native"  # nobody set it: the default
    assert load_config({}).source_of("actor.protocol") == "default"


def test_a_bad_value_names_the_file_it_came_from(places: tuple[Path, Path]) -> None:
    user, _ = places
    user.write_text('timeout = "soon"\n')
    with pytest.raises(UserError, match=rf"{user}:1: key 'timeout'"):
        load_config({})


@pytest.mark.parametrize(
    ("line", "key"), [("trials = true", "trials"), ("temperatures = [0.2, true]", "temperatures")]
)
def test_a_boolean_where_a_number_belongs_is_refused(
    places: tuple[Path, Path], line: str, key: str
) -> None:
    """TOML's true is not a temperature of 1, in a list of numbers as on its own."""
    _, project = places
    project.write_text(f"[loop]\n{line}\n")
    with pytest.raises(UserError, match=rf"{project}:2: .*a number is needed here, not true"):
        load_config({})


def test_config_show_lists_every_setting_with_its_source(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    user, _ = places
    user.write_text('model = "user-model"\n')
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-1234")
    assert main(["config", "show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["files"]["user"] == str(user)
    settings = shown["settings"]
    assert settings["endpoint.model"] == {"value": "user-model", "from": f"{user}:1"}
    assert settings["endpoint.api_key"] == {"value": "…1234", "from": "$OPENAI_API_KEY"}
    assert settings["actor.protocol"] == {"value": "native", "from": "default"}
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert f'endpoint.model = "user-model"  ({user}:1)' in out and "sk-secret" not in out
