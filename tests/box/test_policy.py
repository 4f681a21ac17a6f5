"""What the box hides comes from a `Policy` passed in, not a global: the command's policy (the
suite's answer files, the settings files, the memory) reaches every way into the box.

The command's policy (the suite's answer files, the settings files) reaches every box a run
starts: its checks, its tools, its self-tests; the loop adds the memory's directory. Loading
a suite or the settings changes no process-wide state, so two runs in one process (or a Ray
worker in another) each hide exactly their own paths."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mulligan import sandbox
from mulligan.llm.scripted import ScriptedModel
from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.runs.build import box_policy, build_loop
from mulligan.schema import Task
from mulligan.settings.loading import load_config
from mulligan.tasks.suites import load_suite

PEEK = (
    "for f in answers/tasks.json memory/episodes.db; do "
    'if [ -n "$(head -c 1 $f 2>/dev/null)" ]; then echo READ $f; else echo COVERED $f; fi; '
    "done; false"
)
"""A check that reads the suite's file and the episode log, both in the run's directory (a
covered file reads as empty, a covered directory has nothing in it)."""


def _task_file(tmp_path: Path) -> Path:
    task = {"id": "peek", "prompt": "Say done.", "checks": [{"type": "command", "command": PEEK}]}
    tmp_path.chmod(0o755)  # the box's user may pass (as root it is another user)
    path = tmp_path / "answers" / "tasks.json"
    path.parent.mkdir()
    path.write_text(json.dumps([task]))
    return path


def _in(directory: Path) -> LoopSettings:
    """react, one trial, every attempt working in `directory` (as solve's copies do)."""

    @contextmanager
    def there(task: Task) -> Iterator[Path]:
        yield directory

    return LoopSettings(strategy="react", trials=1, workspace_for=there)


def test_loading_a_suite_or_the_settings_hides_nothing_process_wide(tmp_path: Path) -> None:
    before = sandbox.shared_policy()
    path = _task_file(tmp_path)
    suite = load_suite(str(path))
    (tmp_path / "mulligan.toml").write_text('model = "m"\n')
    config = load_config({}, config_path=tmp_path / "mulligan.toml")
    assert sandbox.shared_policy() == before
    assert str(path.resolve()) in suite.hidden().hidden
    assert str((tmp_path / "mulligan.toml").resolve()) in box_policy(config).hidden


def test_the_runs_policy_covers_the_answers_and_the_memory_in_its_checks(tmp_path: Path) -> None:
    suite = load_suite(str(_task_file(tmp_path)))
    memory = Memory(tmp_path / "memory", HashEmbedding())
    (tmp_path / "memory").chmod(0o755)
    loop = build_loop(ScriptedModel(["done"]), _in(tmp_path), memory=memory, policy=suite.hidden())
    detail = loop.run_episode(suite.tasks[0]).verdicts[0].checks[0].detail
    assert "COVERED answers/tasks.json" in detail, detail
    assert "COVERED memory/episodes.db" in detail, detail
    # the same check in a loop given no policy and no memory reads both
    bare = build_loop(ScriptedModel(["done"]), _in(tmp_path))
    detail = bare.run_episode(suite.tasks[0]).verdicts[0].checks[0].detail
    assert "READ answers/tasks.json" in detail and "READ memory/episodes.db" in detail, detail


def test_the_python_tool_runs_under_the_loops_policy(tmp_path: Path) -> None:
    suite = load_suite(str(_task_file(tmp_path)))
    task = suite.tasks[0].model_copy(update={"tools": ["python"]})
    peek = "print('READ' if open('answers/tasks.json').read() else 'COVERED')"
    call = json.dumps({"name": "python", "arguments": {"code": peek}})
    model = ScriptedModel([f"<tool_call>{call}</tool_call>", "done"])
    episode = build_loop(model, _in(tmp_path), policy=suite.hidden()).run_episode(task)
    outputs = [r.output for s in episode.attempts[0].steps for r in s.results]
    assert any("COVERED" in output for output in outputs), outputs
