"""One rule for whatever serves the model on this machine: `mulligan solve --model local`
(no endpoint configured) speaks the text protocol, as a loopback or private endpoint does,
because the protocol is decided on the URL the connected model answers at."""

from __future__ import annotations

from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.llm import local_server
from tests.llm.smollm2 import tiny_model

pytestmark = pytest.mark.timeout(600)  # a real server on a busy 2-core machine


def test_solve_on_the_local_model_speaks_the_text_protocol(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tiny_model()
    for name in ("MULLIGAN_PROTOCOL", "MULLIGAN_BASE_URL", "OPENAI_BASE_URL", "MULLIGAN_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    project = tmp_path / "calc"
    project.mkdir()
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (project / "test_calc.py").write_text("from calc import add\n\nassert add(2, 3) == 5\n")
    argv = [
        "solve", "make the test pass", "--check", "python3 test_calc.py", "--dir", str(project),
        "--model", f"local:{model}", "--memory", str(tmp_path / "mem"), "--embedding", "hash",
        "--trials", "1", "--max-steps", "1", "--max-reply-tokens", "16",
    ]  # fmt: skip
    try:
        main(argv)  # SmolLM2 fixes nothing: what matters is how it was spoken to
    finally:
        local_server.stop_all()
    err = capsys.readouterr().err
    assert "protocol text" in err and "protocol native" not in err
