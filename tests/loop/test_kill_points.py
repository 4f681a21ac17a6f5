"""A study killed (SIGKILL) at each point where the loop writes, then resumed, ends as one
never interrupted: the same attempts with the same verdicts and charges, the same lessons
with the same counters in the log and in the store, the same lesson events (none twice),
and the same report, wall-clock figures aside.

The child process stops exactly at a named point (tests/helpers/pause_points.py) and this
process kills it there; the scripted endpoint answers by the content of each request, so
the resumed run is asked what the uninterrupted one was. The uninterrupted run and the
killed ones are children; each resume runs in this process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.memory import HashEmbedding, Memory
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.helpers.pause_points import environment, killed_at

TASKS = """\
- id: capital
  family: capitals
  prompt: What is the capital city of Australia? Answer with one word.
  checks: [{type: exact_match, answer: Canberra, name: capital}]
- id: tool
  family: capitals
  prompt: Use python to count to three, then name the capital city of Australia.
  tools: [python]
  budget: {max_steps: 2}
  checks: [{type: exact_match, answer: Canberra, name: capital}]
- id: double
  family: code
  prompt: Write a function f(x) that returns twice x.
  checks:
    - {type: python_tests, tests: "assert f(2) == 4", entry_point: f, name: example}
    - {type: python_tests, tests: "assert f(3) == 6", entry_point: f, name: hidden, visibility: hidden}
"""
DIAGNOSIS = "The attempt said Sydney; the capital of Australia is Canberra, so answer Canberra."
GENERAL = "Name the seat of government (for Australia, Canberra), not the largest city."
INSIGHT = "Check which city holds the government before naming a capital."


def scripted(body: dict[str, Any]) -> FakeReply:
    """Answers by content only: the capital is right once Canberra is in view; the tool task
    runs python first; the code task is right at once; the reflector writes a diagnosis and
    a general lesson, the insight one lesson, the selector two probe inputs."""
    messages = body["messages"]
    first, seen = str(messages[0]["content"]), json.dumps(messages)
    if first.startswith("You review a failed attempt"):
        written = {"diagnosis": DIAGNOSIS, "lesson": GENERAL, "tags": ["capitals"], "replaces": []}
        return FakeReply(content=json.dumps(written))
    if first.startswith("An agent failed a task, then solved it"):
        return FakeReply(content=json.dumps({"lesson": INSIGHT, "tags": ["capitals"]}))
    if first.startswith("Below is a programming task. Several programs"):
        return FakeReply(content=json.dumps({"inputs": [[1], [5]]}))
    if "twice x" in seen:
        return FakeReply(content="```python\ndef f(x):\n    return x * 2\n```")
    if "count to three" in seen and not any(m["role"] == "tool" for m in messages):
        return FakeReply(content=None, tool_calls=[{"name": "python", "arguments": {"code": "print(1, 2, 3)"}}])  # fmt: skip
    return FakeReply(content="Canberra" if "Canberra" in seen else "Sydney")


def bench_args(server: FakeOpenAIServer, tasks: Path, out: Path) -> list[str]:
    return [
        "bench", str(tasks), "--strategies", "react,reflexion-memory,select", "--trials", "3",
        "--probes", "always", "--min-similarity", "0", "--show-candidates",
        "--base-url", server.base_url, "--out", str(out), "--embedding", "hash",
    ]  # fmt: skip


def run_id_of(err: str) -> str:
    return re.findall(r"run id: (\w+)", err)[0]


def finished(argv: list[str]) -> str:
    """`mulligan ARGV` to its end; returns the run id."""
    done = subprocess.run(
        [sys.executable, "-m", "mulligan.cli", *argv],
        capture_output=True, text=True, timeout=120, env=environment(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return run_id_of(done.stderr)


def resumed_here(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """`mulligan ARGV` to its end in this process (what it does is the command line's own;
    a child would add only the seconds of importing it); returns the run id."""
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 0, err
    return run_id_of(err)


def held(out: Path, run_id: str) -> dict[str, Any]:
    """What a finished run left: attempts, lessons (log and store), lesson events and the
    report, with ids, times and paths put aside."""
    memory = Memory(out / "memory", HashEmbedding())
    ids = [row["id"] for row in memory.log.db["lessons"].rows]
    lessons = {lesson.id: lesson for lesson in memory.log.lessons(ids)}
    name = {i: f"{lesson.kind}: {lesson.text[:40]}" for i, lesson in lessons.items()}

    def lesson_record(lesson: Any) -> tuple[Any, ...]:
        v, s = lesson.validity, lesson.source
        counters = (v.status, v.retrieved, v.helped, v.hurt, v.reinforced, v.superseded_by)
        return (lesson.kind, lesson.text, s.task_id, s.trial, counters)

    episodes = {}
    for row in memory.log.episodes(run_id):
        episode = memory.log.episode(row["id"])
        assert episode is not None and row["ended_at"]
        episodes[f"{episode.strategy} {episode.task_id}"] = {
            "passed": episode.passed,
            "written": [name[i] for i in episode.lessons_written],
            "attempts": [
                {
                    "trial": a.trial, "answer": a.answer, "stop": a.stop_reason,
                    "forced": a.final_forced,
                    "passed": v.passed, "visible": v.visible_passed,
                    "usage": {r: u.model_dump() for r, u in sorted(a.usage_by_role.items())},
                    "lessons": [name[i] for i in a.lesson_ids],
                    "steps": [(s.kind, [r.status for r in s.results]) for s in a.steps],
                    "selection": a.selection.model_dump() if a.selection else None,
                }
                for a, v in zip(episode.attempts, episode.verdicts, strict=True)
            ],
        }  # fmt: skip
    where = {row["id"]: f"{row['strategy']} {row['task_id']}" for row in memory.log.episodes()}
    events = sorted(
        (name[e["lesson_id"]], e["event"], where.get(e["episode_id"], ""), e["trial"],
         re.sub(r"\b[0-9a-f]{12}\b", lambda m: name.get(m[0], m[0]), e["detail"]))
        for e in memory.log.lesson_events()
    )  # fmt: skip
    report = (out / "report.md").read_text().replace(run_id, "RUN").replace(str(out), "OUT")
    return {
        "episodes": episodes,
        "lessons": sorted(lesson_record(lesson) for lesson in lessons.values()),
        "stored": sorted(lesson_record(lesson) for lesson in memory.store.all()),
        "events": events,
        "report": re.sub(r"^- run: .*$|^Generated at .*$", "", report, flags=re.M),
    }


def figures(report: str, aside: set[str]) -> str:
    """The report with the columns headed by a name in `aside` blanked in every table, and
    the lines (`- name: ...`) that name one left out."""
    lines, blanked, in_table = [], set[int](), False
    for line in report.splitlines():
        if any(line.startswith(f"- {name}:") for name in aside):
            continue
        cells = line.split("|")
        if line.startswith("|") and not in_table:  # a table's header
            blanked = {n for n, cell in enumerate(cells) if cell.strip() in aside}
        in_table = line.startswith("|")
        lines.append("|".join("" if n in blanked else c for n, c in enumerate(cells)))
    return "\n".join(lines)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeOpenAIServer, Path]]:
    tasks = tmp_path_factory.mktemp("tasks") / "tasks.yaml"
    tasks.write_text(TASKS)
    with FakeOpenAIServer(policy=scripted) as server:
        yield server, tasks


@pytest.fixture(scope="module")
def uninterrupted(study: tuple[FakeOpenAIServer, Path], tmp_path_factory: Any) -> dict[str, Any]:
    server, tasks = study
    out = tmp_path_factory.mktemp("whole")
    return held(out, finished(bench_args(server, tasks, out)))


def test_the_uninterrupted_study_writes_at_every_point(uninterrupted: dict[str, Any]) -> None:
    """The study the kills interrupt: a reflection with a diagnosis and a general lesson, an
    insight, cases, a retrieval that helped, a tool call and a selection with probe inputs."""
    capital = uninterrupted["episodes"]["reflexion-memory capital"]
    assert [a["answer"] for a in capital["attempts"]] == ["Sydney", "Canberra"]
    assert capital["written"] == [
        f"diagnosis: {DIAGNOSIS[:40]}", f"failure: {GENERAL[:40]}", f"insight: {INSIGHT[:40]}"
    ]  # fmt: skip
    kinds = sorted(record[0] for record in uninterrupted["stored"])
    assert kinds == ["case", "case", "case", "failure", "insight"]
    tool = uninterrupted["episodes"]["reflexion-memory tool"]["attempts"]
    assert [s[1] for s in tool[0]["steps"]][0] == ["ok"] and tool[0]["answer"] == "Canberra"
    assert tool[0]["forced"]  # its answer was the last call its budget allowed
    double = uninterrupted["episodes"]["select double"]["attempts"][-1]
    assert double["selection"]["probes"] == 2 and double["usage"]["selector"]["prompt_tokens"]


WALL_CLOCK = {"wall s/task", "seconds per task"}
TOKENS = {
    "prompt tok/task",
    "tokens/success",
    "actor tok/task",
    "tokens per extra success (B over A)",
    "tokens per task",
}
KILL_POINTS = [
    ("actor-call", 5),  # reflexion-memory's trial 2 of the capital, shown the diagnosis
    ("tool-call", 2),  # reflexion-memory's tool task, after a retrieval
    ("answered", 1),  # the shared trial 1 of the capital answered, its check running
    ("answered", 4),  # reflexion-memory's trial 2 of the capital, before the insight
    ("answered", 8),  # a candidate select drew for the tool task, its answer forced
    ("reflector-call", 1),
    ("reflector-reply", 1),
    ("reflector-charged", 1),  # the reflection's tokens logged, no lesson kept yet
    ("lesson-kept", 1),  # the reflection's first lesson kept, not the other
    ("insight-call", 1),
    ("insight-reply", 1),
    ("reflector-charged", 2),  # the insight's tokens logged, no lesson kept yet
    ("lesson-kept", 2),  # the insight kept, not the passing attempt's case
    ("counted", 3),  # the tool task's help counted in the log, not yet in the store's copy
    ("selector-call", 1),  # the probe inputs of the code task
    ("selection-logged", 2),  # the code task's pick, its probes charged
]


@pytest.mark.parametrize(("point", "occurrence"), KILL_POINTS)
def test_a_study_killed_at_a_point_and_resumed_ends_as_one_never_interrupted(
    study: tuple[FakeOpenAIServer, Path],
    uninterrupted: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    point: str,
    occurrence: int,
) -> None:
    server, tasks = study
    argv = bench_args(server, tasks, tmp_path / "out")
    run_id = killed_at(point, occurrence, argv, tmp_path / "reached")
    assert resumed_here([*argv, "--resume", run_id], capsys) == run_id
    resumed = held(tmp_path / "out", run_id)
    aside = set(WALL_CLOCK)
    if point == "tool-call":  # the call cut off is shown to the model as interrupted, not run
        attempt = resumed["episodes"]["reflexion-memory tool"]["attempts"][0]
        assert attempt["steps"][0] == ("act", ["interrupted"])
        assert attempt["answer"] == "Canberra"
        whole = uninterrupted["episodes"]["reflexion-memory tool"]["attempts"][0]
        attempt["steps"], attempt["usage"] = whole["steps"], whole["usage"]
        aside |= TOKENS  # its observation is another text than the call's output
    for part in ("episodes", "lessons", "stored", "events"):
        assert resumed[part] == uninterrupted[part], part
    assert figures(resumed["report"], aside) == figures(uninterrupted["report"], aside)
