"""The box's basic promises: both output streams come back; loops, CPU hogs, fork bombs and
huge allocations are stopped; nothing is written outside the scratch directory; secrets are
not in the child's environment."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mulligan import sandbox
from mulligan.errors import UserError
from mulligan.sandbox import Limits, levels
from mulligan.sandbox.policy import clear_shared


def test_runs_code_and_returns_both_streams() -> None:
    result = sandbox.run_python("import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert result.ok
    assert "out" in result.describe() and "[stderr]\nerr" in result.describe()


def test_infinite_loop_is_stopped() -> None:
    result = sandbox.run_python("while True:\n    pass", limits=Limits(timeout=1.5, cpu_seconds=5))
    assert not result.ok
    assert result.timed_out
    assert "timed out" in result.describe()


def test_cpu_limit_stops_a_busy_loop_before_the_wall_clock() -> None:
    result = sandbox.run_python("while True:\n    pass", limits=Limits(timeout=20, cpu_seconds=1))
    assert not result.ok and not result.timed_out
    assert "SIGKILL" in result.describe() or "SIGXCPU" in result.describe()


def test_fork_bomb_is_contained() -> None:
    code = "import os\nwhile True:\n    os.fork()"
    result = sandbox.run_python(code, limits=Limits(timeout=5, processes=16))
    assert not result.ok
    # the machine still works afterwards, and nothing of the bomb is left running
    assert sandbox.run_python("print(1)").stdout.strip() == "1"


def test_ten_gigabyte_allocation_fails() -> None:
    result = sandbox.run_python("x = bytearray(10 * 1024**3)\nprint('allocated')")
    assert not result.ok
    assert "MemoryError" in result.stderr
    assert "allocated" not in result.stdout


def test_cannot_write_outside_the_scratch_directory(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    code = f"open({str(outside)!r}, 'w').write('escaped')\nprint('wrote it')"
    result = sandbox.run_python(code)
    if os.geteuid() != 0:
        pytest.skip("without root the sandbox cannot take away the user's own write access")
    assert not result.ok and not outside.exists()
    assert any(w in result.stderr for w in ("Permission", "No such file", "Read-only"))


def test_secrets_are_not_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    result = sandbox.run_python(
        "import os\nprint(sorted(os.environ))\nprint(os.environ.get('OPENAI_API_KEY'))"
    )
    assert "sk-very-secret" not in result.stdout
    assert "OPENAI_API_KEY" not in result.stdout and "GITHUB_TOKEN" not in result.stdout
    shell = sandbox.run_shell("echo key=$OPENAI_API_KEY")
    assert shell.stdout.strip() == "key="


def test_writable_workspace_is_usable_by_the_child(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("hello")
    result = sandbox.run_shell("cat data.txt && echo more > new.txt", cwd=tmp_path, writable=True)
    assert result.ok, result.describe()
    assert (tmp_path / "new.txt").read_text() == "more\n"


def test_empty_output_says_so() -> None:
    assert sandbox.run_shell("true").describe() == "(no output)"


@pytest.fixture
def fresh_containment(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Containment is probed once per process; these tests probe it again under their setting
    (`auto` unless they name one, whatever MULLIGAN_SANDBOX the suite runs under)."""
    sandbox.containment.cache_clear()
    monkeypatch.delenv("MULLIGAN_SANDBOX", raising=False)
    yield monkeypatch
    monkeypatch.undo()
    sandbox.containment.cache_clear()


def test_without_namespaces_the_limits_still_hold_and_the_gaps_are_named(
    fresh_containment: pytest.MonkeyPatch,
) -> None:
    fresh_containment.setenv("MULLIGAN_SANDBOX", "rlimits")
    box = sandbox.containment()
    assert box.level == "rlimits" and "network isolation" in box.missing
    result = sandbox.run_python(
        "import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))"
    )
    assert result.ok and int(result.stdout) > 1  # other processes are visible: said, not hidden
    hog = sandbox.run_python("x = bytearray(4 * 1024**3)", limits=Limits(memory_bytes=256 << 20))
    assert not hog.ok and "MemoryError" in hog.stderr


def without(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """As on a machine where these programs are not installed."""
    real_which = shutil.which
    monkeypatch.setattr(
        levels.shutil, "which", lambda name: None if name in names else real_which(name)
    )


def test_missing_bubblewrap_means_the_unshare_backend(
    fresh_containment: pytest.MonkeyPatch,
) -> None:
    without(fresh_containment, "bwrap")
    box = sandbox.containment()
    assert (box.level, box.backend) == ("namespaces", "unshare"), box
    assert "unshare" in box.detail
    result = sandbox.run_python("import os\nprint(sorted(os.listdir('/proc'))[:1])")
    assert result.ok, result.describe()
    sandbox.containment.cache_clear()
    fresh_containment.setenv("MULLIGAN_SANDBOX", "bwrap")
    with pytest.raises(UserError, match="bubblewrap is not installed"):
        sandbox.containment()


def test_with_neither_backend_it_falls_back_loudly_or_refuses_as_asked(
    fresh_containment: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    without(fresh_containment, "bwrap", "unshare")
    with caplog.at_level(logging.WARNING, logger="mulligan"):
        box = sandbox.containment()
        sandbox.containment()  # probed once: said once
    assert box.level == "rlimits" and box.backend is None
    assert "apt-get install bubblewrap" in box.detail and "util-linux" in box.detail
    said = [r.getMessage() for r in caplog.records if "NO NAMESPACES" in r.getMessage()]
    assert len(said) == 1 and "network isolation" in said[0] and "hidden paths" in said[0]
    for wanted in ("namespaces", "unshare"):
        sandbox.containment.cache_clear()
        fresh_containment.setenv("MULLIGAN_SANDBOX", wanted)
        with pytest.raises(UserError, match="unshare is not installed"):
            sandbox.containment()
    sandbox.containment.cache_clear()
    fresh_containment.setenv("MULLIGAN_SANDBOX", "sometimes")
    with pytest.raises(UserError, match="MULLIGAN_SANDBOX='sometimes'"):
        sandbox.containment()


def test_hidden_paths_are_covered_in_the_box(tmp_path: Path) -> None:
    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / "key.txt").write_text("the answer is forty-two")
    (tmp_path / "answer.txt").write_text("also forty-two")
    os.chmod(tmp_path, 0o755)
    code = (
        f"import os\nprint(os.listdir({str(answers)!r}))\n"
        f"print(repr(open({str(tmp_path / 'answer.txt')!r}).read()))"
    )
    assert "key.txt" in sandbox.run_python(code, cwd=tmp_path).stdout  # readable before hidden
    sandbox.hide(answers)
    sandbox.hide(tmp_path / "answer.txt")
    try:
        result = sandbox.run_python(code, cwd=tmp_path)
        assert "[]" in result.stdout and "forty-two" not in result.stdout + result.stderr
    finally:
        clear_shared()


def test_the_humaneval_data_is_hidden_in_runs_under_the_suites_policy() -> None:
    from mulligan.tasks.humaneval import humaneval_path
    from mulligan.tasks.suites import load_suite

    data = humaneval_path()
    code = f"print(len(open({str(data)!r}, 'rb').read()))"
    suite = load_suite("humaneval")
    result = sandbox.run_python(code, policy=suite.hidden())
    assert not result.ok and "No such file" in result.stderr
