"""Each setting is defined once, as a field of a section of the run configuration: its flag on
run, bench and solve, its MULLIGAN_* variable, its mulligan.toml key, its bounds (the same
from every source) and its line in `config show` and in docs/settings.md all come from that
field; the committed docs/settings.md is the one `mulligan config reference` makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mulligan.cli import build_parser, main
from mulligan.cli.help_format import commands_of
from mulligan.cli.reference import settings_reference
from mulligan.errors import UserError
from mulligan.settings.fields import settings
from mulligan.settings.loading import load_config
from mulligan.settings.run_config import SECRETS

ROOT = Path(__file__).resolve().parents[2]


def a_value(one: object) -> object:
    """A valid value other than the default, as a string a flag or variable would give."""
    from mulligan.settings.fields import Setting

    assert isinstance(one, Setting)
    if one.choices:
        return next(c for c in one.choices if c != one.default)
    if one.kind is int:
        return int(one.bounds().get("ge", 1)) + 1
    if one.kind is float:
        return 0.5
    if one.kind is bool:
        return not one.default
    if one.name == "base_url":
        return "http://127.0.0.1:1/v1"
    if one.name == "embedding":
        return "hash"
    return "some-text"


def test_the_committed_settings_reference_is_current() -> None:
    committed = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert committed == settings_reference(), "run: mulligan config reference > docs/settings.md"


def test_the_committed_flag_table_is_current() -> None:
    """The parser's table of flags (read without pydantic) says what the fields say."""
    from mulligan.cli.setting_flags import TABLE, flag_table

    committed = json.loads(TABLE.read_text(encoding="utf-8"))
    assert committed == flag_table(), "run: python scripts/flag_table.py"


def test_every_setting_is_in_the_reference_with_its_flag_and_variable() -> None:
    text = settings_reference()
    for one in settings():
        assert f"| `{one.name}` |" in text, one.path
        for name in one.env:
            assert f"`{name}`" in text, (one.path, name)
        if one.option:
            assert f"`{one.option}`" in text, one.path


def test_every_flagged_setting_is_a_flag_of_run_bench_and_solve_with_its_help() -> None:
    commands = commands_of(build_parser())
    for name in ("run", "bench", "solve"):
        actions = {a.dest: a for a in commands[name]._actions}
        for one in settings():
            if not one.flag or (name == "solve" and one.path == "loop.self_tests"):
                continue
            assert one.flag in actions, (name, one.path)
            assert one.help and (actions[one.flag].help or "").startswith(one.help), one.path


@pytest.mark.parametrize("one", [s for s in settings() if s.env], ids=lambda s: s.path)
def test_every_variable_sets_its_setting(
    one: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mulligan.settings.fields import Setting

    assert isinstance(one, Setting)
    monkeypatch.chdir(tmp_path)
    value = a_value(one)
    if one.name == "prices_file":
        (tmp_path / "p.json").write_text("{}")
        value = str(tmp_path / "p.json")
    shown = str(value).lower() if isinstance(value, bool) else str(value)
    monkeypatch.setenv(one.env[0], shown)
    config = load_config({})
    assert config.source_of(one.path) == f"${one.env[0]}"
    got = getattr(getattr(config, one.section), one.name)
    assert got == value or str(got) == str(value), (one.path, got, value)


@pytest.mark.parametrize("one", settings(), ids=lambda s: s.path)
def test_every_setting_is_a_key_of_its_section_in_mulligan_toml(
    one: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mulligan.settings.fields import Setting

    assert isinstance(one, Setting)
    monkeypatch.chdir(tmp_path)
    listed = [0.5] if "float" in str(one.kind) else []  # a list of numbers, or of text
    value = {} if "dict" in str(one.kind) else (listed if one.is_list else a_value(one))
    if one.name == "prices_file":
        (tmp_path / "p.json").write_text("{}")
        value = str(tmp_path / "p.json")
    (tmp_path / "mulligan.toml").write_text(f"[{one.section}]\n{one.name} = {json.dumps(value)}\n")
    config = load_config({})
    assert config.source_of(one.path).endswith("mulligan.toml:2"), one.path


@pytest.mark.parametrize("one", [s for s in settings() if s.bounds()], ids=lambda s: s.path)
def test_a_bound_is_the_same_from_a_flag_a_variable_and_a_file(
    one: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from mulligan.settings.fields import Setting

    assert isinstance(one, Setting)
    bounds = one.bounds()
    outside = bounds["ge"] - 1 if "ge" in bounds else bounds.get("gt", 0) - 1
    if "ge" not in bounds and "gt" not in bounds:
        outside = bounds.get("le", bounds.get("lt", 0)) + 1
    monkeypatch.chdir(tmp_path)
    said = f"must be {one.words()}"
    if one.flag:
        with pytest.raises(UserError, match=said.replace("(", r"\(")):
            load_config({one.flag: outside})
    if one.env:
        monkeypatch.setenv(one.env[0], str(outside))
        with pytest.raises(UserError, match=one.env[0]):
            load_config({})
        monkeypatch.delenv(one.env[0])
    (tmp_path / "mulligan.toml").write_text(f"[{one.section}]\n{one.name} = {outside}\n")
    with pytest.raises(UserError, match="mulligan.toml:2"):
        load_config({})


def test_config_show_lists_every_setting_and_hides_the_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MULLIGAN_API_KEY", "sk-secret-1234")
    assert main(["config", "show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["settings"]
    assert set(shown) == {one.path for one in settings()}
    for path in SECRETS:
        assert "secret" not in json.dumps(shown[path])
