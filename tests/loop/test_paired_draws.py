"""`run --draws-from`: a memory arm reuses its baseline's draws wherever its attempt would be
made from the bare prompt, so the two arms differ only in the attempts a lesson was shown to;
a baseline that could not stand in for the run's draws is refused."""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.errors import UserError
from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.log import EpisodeLog
from mulligan.memory.reading import MemoryReader
from mulligan.runs.paired_draws import draws_from
from mulligan.schema import SELF_TEST
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.memory.helpers import plant

LESSON = "Name the capital city, not the largest city: for Australia that is Canberra."
REVIEW = "You review a failed attempt"


def task_file(path: Path) -> Path:
    path.write_text(
        "".join(
            f"- id: t{n}\n  family: {'capitals' if n == 0 else 'other'}\n  prompt: (t{n}) What is the capital city of "
            "Australia? One word.\n  checks: [{type: exact_match, answer: Canberra}]\n"
            for n in range(3)
        )
    )
    return path


def server() -> FakeOpenAIServer:
    """Each actor draw is a wrong answer of its own (`Sydney 7`), right with the lesson in
    view; the reviewer writes no lesson."""
    draws = itertools.count(1)

    def policy(body: dict[str, Any]) -> FakeReply:
        if REVIEW in body["messages"][0]["content"]:
            return FakeReply(content=json.dumps({"diagnosis": "Think again.", "lesson": ""}))
        text = json.dumps(body["messages"])
        return FakeReply(content="Canberra" if LESSON in text else f"Sydney {next(draws)}")

    return FakeOpenAIServer(policy=policy)


def run(fake: FakeOpenAIServer, tasks: Path, memory: Path, *more: str) -> int:
    return main(argv(fake, tasks, memory, *more))


def argv(fake: FakeOpenAIServer, tasks: Path, memory: Path, *more: str) -> list[str]:
    return [
        "run", str(tasks), "--trials", "2", "--min-similarity", "0", "--json", "--embedding",
        "hash", "--base-url", fake.base_url, "--memory", str(memory), *more,
    ]  # fmt: skip


def answers(memory: Path) -> dict[tuple[str, int], tuple[str, list[str]]]:
    log = Memory(memory, HashEmbedding()).log
    made = [log.episode(row["id"]) for row in log.episodes()]
    return {
        (e.task_id, a.trial): (a.answer or "", a.lesson_ids) for e in made if e for a in e.attempts
    }


def actor_calls(fake: FakeOpenAIServer, since: int) -> int:
    return sum(REVIEW not in r["messages"][0]["content"] for r in fake.requests[since:])


def run_memory_arm(fake: FakeOpenAIServer, tasks: Path, arm: Path, baseline: Path) -> int:
    """The memory arm, a validated lesson for the capitals family planted in its memory, run
    drawing from `baseline`; returns how many requests the server had before it."""
    memory = Memory(arm, HashEmbedding())
    plant(memory, "l1", LESSON, family="capitals", status="validated")
    del memory
    start = len(fake.requests)
    run(fake, tasks, arm, "--strategy", "retry[memory]", "--draws-from", str(baseline))
    return start


def test_the_memory_arm_reuses_the_baselines_draws_where_nothing_is_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = task_file(tmp_path / "tasks.yaml")
    with server() as fake:
        assert run(fake, tasks, tmp_path / "base", "--strategy", "retry") == 1
        arm = tmp_path / "arm"
        called = actor_calls(fake, run_memory_arm(fake, tasks, arm, tmp_path / "base"))
    base, mine = answers(tmp_path / "base"), answers(arm)
    assert len(base) == 6  # three tasks, two failed attempts each, every one a draw of its own
    shown = {key for key, (_, ids) in mine.items() if ids}
    assert shown == {("t0", 1)} and mine[("t0", 1)][0] == "Canberra"  # drawn afresh
    bare = {key: answer for key, (answer, ids) in mine.items() if not ids}
    assert len(bare) == 4  # the other family's tasks: both trials the baseline's
    assert all(bare[key] == base[key][0] for key in bare)  # the baseline's own draw
    assert called == len(shown)  # the model was asked only for the attempts shown a lesson


def test_a_baseline_that_cannot_stand_in_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = task_file(tmp_path / "tasks.yaml")
    with server() as fake:
        assert run(fake, tasks, tmp_path / "base", "--strategy", "retry") == 1
        capsys.readouterr()

        def refused(tasks: Path, memory: str, baseline: str, *more: str) -> str:
            """What a memory arm drawing from `baseline` says as it refuses to start."""
            arm = ["--strategy", "retry[memory]", "--draws-from", str(tmp_path / baseline)]
            assert run(fake, tasks, tmp_path / memory, *arm, *more) == 2
            return capsys.readouterr().err

        assert "config.endpoint.model" in refused(tasks, "a", "base", "--model", "another")
        other = tasks.with_name("other.yaml")
        other.write_text(tasks.read_text().replace("(t2)", "(t2) Really,"))
        assert "did not attempt task 't2'" in refused(other, "e", "base")
        assert run(fake, tasks, tmp_path / "r", "--strategy", "reflexion") == 1
        capsys.readouterr()
        assert "carry nothing between trials" in refused(tasks, "b", "r")
        assert run(fake, tasks, tmp_path / "base", "--strategy", "react") == 1
        capsys.readouterr()
        assert "holds 2 runs" in refused(tasks, "c", "base")
        assert "--draws-from" in refused(tasks, "d", "nowhere")
        assert not (tmp_path / "nowhere").exists()


CODE_TASK = """\
- id: double
  family: code
  prompt: Write a function f(x) that returns twice x.
  checks: [{type: python_tests, tests: "assert f(3) == 6", entry_point: f, name: example}]
"""


def test_the_memory_arm_checks_its_attempts_against_the_baselines_self_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reused attempt was judged with the self-tests the baseline's run wrote: the arm keeps
    those and writes none, so that its attempts made afresh are checked against the same
    tests; a baseline with another number of self-tests is refused."""
    tasks = tmp_path / "code.yaml"
    tasks.write_text(CODE_TASK)
    written = itertools.count(1)

    def policy(body: dict[str, Any]) -> FakeReply:
        if body["messages"][0]["content"].startswith("You write unit tests"):
            n = next(written)
            return FakeReply(content=f"```python\nassert f({n}) == {2 * n}\n```")
        return FakeReply(content="```python\ndef f(x):\n    return x * 3\n```")

    with FakeOpenAIServer(policy=policy) as fake:
        assert run(fake, tasks, tmp_path / "base", "--strategy", "retry", "--self-tests", "1") == 1
        arm = ["--strategy", "retry[memory]", "--draws-from", str(tmp_path / "base")]
        assert run(fake, tasks, tmp_path / "arm", *arm, "--self-tests", "1") == 1
        assert next(written) == 2  # the baseline's run wrote them, the arm's did not
        capsys.readouterr()
        assert run(fake, tasks, tmp_path / "other", *arm, "--self-tests", "2") == 2
        assert "config.loop.self_tests" in capsys.readouterr().err
    (tests,) = kept_self_tests(tmp_path / "base")
    assert kept_self_tests(tmp_path / "arm") == [tests]
    log = EpisodeLog(tmp_path / "arm" / "episodes.db", read_only=True)
    episode = log.episode(log.episodes()[0]["id"])
    assert episode is not None and len(episode.verdicts) == 2  # both the baseline's
    for verdict in episode.verdicts:
        checked = [c.name for c in verdict.checks if c.name.startswith(SELF_TEST)]
        assert [name.split(": ", 1)[1] for name in checked] == tests


def kept_self_tests(memory: Path) -> list[list[str]]:
    log = EpisodeLog(memory / "episodes.db", read_only=True)
    return [kept["tests"] for kept in log.run_self_tests(log.runs()[0]["id"])]


def test_the_memory_arm_cannot_run_in_the_baselines_own_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The baseline's memory holds its run alone: a memory arm logged there would read what
    the baseline wrote and, once started, leave a memory of two runs it could not resume from."""
    tasks, base = task_file(tmp_path / "tasks.yaml"), tmp_path / "base"
    with server() as fake:
        assert run(fake, tasks, base, "--strategy", "retry") == 1
        capsys.readouterr()
        assert run(fake, tasks, base, "--strategy", "retry[memory]", "--draws-from", str(base)) == 2
        assert "this run's own --memory" in capsys.readouterr().err
    assert len(EpisodeLog(base / "episodes.db", read_only=True).runs()) == 1


def test_a_baseline_offered_other_tools_is_refused(tmp_path: Path) -> None:
    """The MCP servers' tools are in every attempt's prompt: a baseline run without them (or
    with others) drew from another prompt."""
    tasks, base = task_file(tmp_path / "tasks.yaml"), tmp_path / "base"
    with server() as fake:
        assert run(fake, tasks, base, "--strategy", "retry") == 1
    mine = MemoryReader(base).runs()[0].manifest
    assert draws_from(str(base), mine, tmp_path / "arm" / "episodes.db")  # the same: taken
    mine["config"]["run"]["mcp"] = ["python -m some_tools"]
    with pytest.raises(UserError, match="config.run.mcp"):
        draws_from(str(base), mine, tmp_path / "arm" / "episodes.db")


def test_a_prompt_one_run_had_and_the_other_lacked_is_a_prompt_that_differs(
    tmp_path: Path,
) -> None:
    """A baseline whose mulligan lacked a prompt this one's bare draws read (or had one this
    one lacks) drew from another prompt; one only a shown lesson or the reviewer reads may
    be there in one run alone."""
    tasks, base = task_file(tmp_path / "tasks.yaml"), tmp_path / "base"
    with server() as fake:
        assert run(fake, tasks, base, "--strategy", "retry") == 1
    mine = MemoryReader(base).runs()[0].manifest
    own = tmp_path / "arm" / "episodes.db"
    del mine["prompt_hashes"]["lessons"]
    assert draws_from(str(base), mine, own)  # read by a shown lesson alone: taken
    mine["prompt_hashes"]["a_new_nudge"] = "0123456789ab"
    with pytest.raises(UserError, match=r"prompts differ.*a_new_nudge"):
        draws_from(str(base), mine, own)
    del mine["prompt_hashes"]["a_new_nudge"], mine["prompt_hashes"]["task"]
    with pytest.raises(UserError, match=r"prompts differ.*\btask\b"):
        draws_from(str(base), mine, own)


def test_a_baseline_an_older_mulligan_wrote_is_left_as_it_is_and_a_copy_is_brought_up_to_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A baseline is only read: its refusal says to bring a copy up to date, never to run a
    command on it that writes (a run with its --memory would leave it two runs, refused from
    then on as a baseline), and the copy it says to make stands in."""
    tasks, base, copy = task_file(tmp_path / "tasks.yaml"), tmp_path / "base", tmp_path / "copy"
    arm = ["--strategy", "retry[memory]", "--draws-from"]
    with server() as fake:
        assert run(fake, tasks, base, "--strategy", "retry") == 1
        with sqlite3.connect(base / "episodes.db") as connection:  # as before its migration
            connection.execute("drop table self_tests")
            connection.execute("delete from migrations where name = '004_self_tests'")
        connection.close()
        capsys.readouterr()
        assert run(fake, tasks, tmp_path / "arm", *arm, str(base)) == 2
        err = capsys.readouterr().err
        assert f"--draws-from {base}: the episode log was written by an older mulligan" in err
        assert f"cp -a {base} COPY && mulligan memory upgrade --memory COPY" in err, err
        assert "the next run" not in err, err
        assert "004_self_tests" not in migrations(base)  # left as it was
        shutil.copytree(base, copy, symlinks=True)  # the way round it names
        assert main(["memory", "upgrade", "--memory", str(copy)]) == 0
        assert "004_self_tests" in migrations(copy) and capsys.readouterr().out
        assert run(fake, tasks, tmp_path / "arm", *arm, str(copy)) == 1, capsys.readouterr().err


def migrations(memory: Path) -> set[str]:
    """The migrations the memory's log holds (read-only)."""
    uri = f"{(memory / 'episodes.db').resolve().as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
        return {name for (name,) in connection.execute("select name from migrations")}


def test_prompts_only_a_shown_lesson_or_the_reviewer_reads_may_differ_from_the_baselines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory arm that words its lessons block (or its reviewer) otherwise still draws from
    the bare prompt its baseline drew from, so it may reuse the baseline's draws: a study can
    vary how lessons are written and shown, paired on one baseline. A prompt a bare draw
    reads (the actor's instructions) changed is refused, named."""
    from mulligan.prompts import PACKAGE_DIR

    tasks = task_file(tmp_path / "tasks.yaml")
    mine = tmp_path / "prompts"
    mine.mkdir()
    marker = "Advice from other tasks: follow an item only where it fits this task."
    (mine / "lessons.md").write_text(marker + "\n" + (PACKAGE_DIR / "lessons.md").read_text())
    (mine / "reflect.md").write_text(
        "Reviewer, briefly.\n" + (PACKAGE_DIR / "reflect.md").read_text()
    )
    with server() as fake:
        assert run(fake, tasks, tmp_path / "base", "--strategy", "retry") == 1
        monkeypatch.setenv("MULLIGAN_PROMPTS_DIR", str(mine))
        start = run_memory_arm(fake, tasks, tmp_path / "arm", tmp_path / "base")
        asked = [json.dumps(r["messages"]) for r in fake.requests[start:]]
        assert actor_calls(fake, start) == 1 and any(marker in text for text in asked)
        capsys.readouterr()
        (mine / "actor_native.md").write_text(
            "Answer tersely.\n" + (PACKAGE_DIR / "actor_native.md").read_text()
        )
        arm = ["--strategy", "retry[memory]", "--draws-from", str(tmp_path / "base")]
        assert run(fake, tasks, tmp_path / "arm2", *arm) == 2
        assert "prompts differ" in capsys.readouterr().err


def test_no_baseline_strategy_renders_a_prompt_an_arm_may_word_otherwise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every strategy a baseline may run (each option of each, as `draws_from` decides) makes
    its attempts without rendering any prompt in NOT_IN_A_BARE_DRAW, even when every attempt
    fails: were one rendered, a baseline's draws would depend on it, and an arm wording it
    otherwise could not reuse them."""
    from mulligan import prompts, strategies
    from mulligan.runs.paired_draws import NOT_IN_A_BARE_DRAW, _bare

    names = [
        s.with_options(words).name
        for s in strategies.REGISTRY.values()
        if not s.outside_loop
        for words in [[], *([o.word] for o in s.options)]
    ]
    baselines = [name for name in names if _bare(name)]
    assert {"react", "retry", "select"} <= set(baselines)
    rendered: list[str] = []
    real = prompts.render

    def spy(name: str, /, **variables: Any) -> str:
        rendered.append(name)
        return real(name, **variables)

    monkeypatch.setattr(prompts, "render", spy)
    tasks = task_file(tmp_path / "tasks.yaml")
    with server() as fake:
        for n, name in enumerate(baselines):
            rendered.clear()
            assert run(fake, tasks, tmp_path / f"base{n}", "--strategy", name) == 1
            assert "task" in rendered, (name, rendered)  # the spy sees the attempts' prompts
            assert NOT_IN_A_BARE_DRAW.isdisjoint(rendered), (name, sorted(set(rendered)))
    capsys.readouterr()
