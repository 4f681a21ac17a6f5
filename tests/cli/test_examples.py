"""The seed scenarios, driven by the scripted model, and the example scripts end to end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from mulligan.actor import Actor, build_tools
from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import ToolCall
from mulligan.tasks.examples import EXAMPLE_TOOLS, TASKS
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel, reply

EXAMPLES = Path(__file__).parents[2] / "examples"


def task(task_id: str):  # type: ignore[no-untyped-def]
    return next(t for t in TASKS if t.id == task_id)


def test_weather_both_cities_in_one_turn_then_calculator() -> None:
    t = task("examples/weather")
    both = reply(
        "",
        ToolCall(id="w1", name="weather", arguments='{"city": "Beijing"}'),
        ToolCall(id="w2", name="weather", arguments='{"city": "Shanghai"}'),
    )
    diff = reply(
        "", ToolCall(id="c1", name="calculator", arguments='{"expression": "31.0 - 28.5"}')
    )
    with ScriptedModel([both, diff, "Beijing is hotter, by 2.5 °C."]) as model:
        attempt = Actor(model).run(t.id, t.prompt, build_tools(t.tools, extra=EXAMPLE_TOOLS))
    first = attempt.steps[0].results
    assert [r.call_id for r in first] == ["w1", "w2"]
    assert '"high_c": 31.0' in first[0].output and '"high_c": 28.5' in first[1].output
    assert attempt.steps[1].results[0].output == "2.5"
    assert attempt.answer == "Beijing is hotter, by 2.5 °C."


def test_count_python_files_with_a_read_only_listing(tmp_path: Path) -> None:
    t = task("examples/count-python-files")
    for relative, content in (t.workspace or {}).items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(content)
    listing = reply("", ToolCall(id="l", name="list_files", arguments="{}"))
    with ScriptedModel([listing, "3"]) as model:
        attempt = Actor(model).run(t.id, t.prompt, build_tools(t.tools, workspace=tmp_path))
    seen = attempt.steps[0].results[0].output
    assert sum(line.endswith(".py") for line in seen.splitlines()) == 3
    assert attempt.answer == "3"


def test_paper_year_needs_a_second_precise_search() -> None:
    t = task("examples/paper-year")
    broad = reply("", ToolCall(id="s1", name="search", arguments='{"entity": "ExampleAgent"}'))
    precise = reply(
        "",
        ToolCall(
            id="s2", name="search", arguments='{"entity": "ExampleAgent: Learning from Mistakes"}'
        ),
    )
    look = reply("", ToolCall(id="l1", name="lookup", arguments='{"keyword": "published"}'))
    with ScriptedModel([broad, precise, look, "2022"]) as model:
        attempt = Actor(model).run(t.id, t.prompt, build_tools(t.tools, documents=t.documents))
    hint, record, sentence = (s.results[0].output for s in attempt.steps[:3])
    assert hint.startswith("Could not find") and "ExampleAgent: Learning from Mistakes" in hint
    assert "fictional paper" in record
    assert "2022" in sentence
    assert attempt.answer == "2022"


def run_script(name: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=60,
    )


def test_example_script_runs_against_the_fake_server() -> None:
    replies = [
        FakeReply(
            content=None,
            tool_calls=[
                {"name": "weather", "arguments": {"city": "Beijing"}},
                {"name": "weather", "arguments": {"city": "Shanghai"}},
            ],
        ),
        FakeReply(content="Beijing, by 2.5 degrees."),
    ]
    with FakeOpenAIServer(replies) as server:
        done = run_script("weather.py", {"OPENAI_BASE_URL": server.base_url})
        assert server.violations == []
    assert done.returncode == 0, done.stderr
    assert "answer: Beijing, by 2.5 degrees." in done.stdout


def test_example_script_without_endpoint_says_how() -> None:
    # with the local extra installed (the README's first command) the local model would
    # answer instead: this is the machine without it, or with it turned off
    done = run_script("paper_year.py", {"MULLIGAN_LOCAL": "off"})
    assert done.returncode == 2
    assert "OPENAI_BASE_URL" in done.stderr


def test_reflexion_with_memory_from_python(tmp_path: Path) -> None:
    """examples/reflexion_memory.py: wrong, reflected on, right; the lesson is in the memory
    directory afterwards, for the next run."""
    lesson = "Answer with the capital city, Canberra, not the largest city."

    def policy(body: dict[str, Any]) -> FakeReply:
        first = str(body["messages"][0]["content"])
        if "You review a failed attempt" in first:
            diagnosis = "Sydney is the largest city; the capital is Canberra."
            return FakeReply(content=json.dumps({"diagnosis": diagnosis, "lesson": lesson}))
        return FakeReply(content="Canberra" if "Canberra" in json.dumps(body) else "Sydney")

    assert len((EXAMPLES / "reflexion_memory.py").read_text().splitlines()) <= 40
    with FakeOpenAIServer(policy=policy) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "MULLIGAN_EMBEDDING": "hash"}
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / "reflexion_memory.py"), str(tmp_path / "mem")],
            capture_output=True, text=True, env={**os.environ, **env}, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "trial 1: FAIL 'Sydney'" in done.stdout and "trial 2: PASS 'Canberra'" in done.stdout
    stored = Memory(tmp_path / "mem", HashEmbedding()).store.all()
    assert [s.text for s in stored if s.kind != "case"] == [lesson]  # and trial 2, a case


def test_the_readmes_python_section_runs_against_an_endpoint(tmp_path: Path) -> None:
    """README.md's "From Python", as written, its URL the fake server's: wrong, reflected on,
    right; the lesson kept in `agent-memory` as a candidate."""
    readme = (EXAMPLES.parent / "README.md").read_text()
    section = readme.split("## From Python", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    lesson = "Name the capital city, which is often not the largest city."

    def policy(body: dict[str, Any]) -> FakeReply:
        if "You review a failed attempt" in str(body["messages"][0]["content"]):
            diagnosis = "Sydney is the largest city; the capital is Canberra."
            return FakeReply(content=json.dumps({"diagnosis": diagnosis, "lesson": lesson}))
        return FakeReply(content="Canberra" if "Canberra" in json.dumps(body) else "Sydney")

    with FakeOpenAIServer(policy=policy) as server:
        assert code.count("http://127.0.0.1:8011/v1") == 1
        code = code.replace("http://127.0.0.1:8011/v1", server.base_url)
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
            env={**os.environ, "MULLIGAN_EMBEDDING": "hash"}, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "True ['Sydney', 'Canberra']"
    assert f"failure candidate {lesson}" in lines
    assert (tmp_path / "agent-memory" / "episodes.db").exists()


def test_a_persistent_agent_run_twice_grows_its_lessons_evidence(tmp_path: Path) -> None:
    """examples/persistent_agent.py in two processes on one memory: the first task's lesson
    is tried on later attempts by assignment, each pair of them its evidence; the second run
    goes on from the first's evidence, the lesson is validated within six tasks, and then a
    first attempt is shown it and passes."""
    command = [sys.executable, str(EXAMPLES / "persistent_agent.py"), str(tmp_path / "mem")]
    runs = [subprocess.run(command, capture_output=True, text=True, timeout=120) for _ in range(2)]
    assert [done.returncode for done in runs] == [0, 0], runs[-1].stderr

    def lesson_lines(output: str) -> list[tuple[str, str, int]]:
        found = re.findall(r"lesson (\w+): (\w+), pairs (\d+)", output)
        return [(lesson, status, int(pairs)) for lesson, status, pairs in found]

    first, second = (lesson_lines(done.stdout) for done in runs)
    assert len({lesson for lesson, _, _ in first + second}) == 1  # one lesson, kept
    assert first[-1][2] >= 1  # a pair already in the first process
    pairs = [p for _, _, p in first + second]
    assert pairs == sorted(pairs) and second[-1] == (first[0][0], "validated", pairs[-1])
    assert re.search(r"^task \d+: PASS \(shown the lesson\)$", runs[1].stdout, re.M)
