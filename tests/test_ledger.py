"""Issue 11, item 1: every token counted, by role; resume keeps the budget; time and price."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.long_task import SUMMARISER_MARK
from mulligan.actor import Actor, ActorSettings, Budget, CompressionSettings, tool
from mulligan.bench.stats import collect
from mulligan.cli import main
from mulligan.errors import DeadlineExceeded
from mulligan.evaluator import Evaluator
from mulligan.llm.base import ChatResponse
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.loop import Loop, LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.reflector import Reflector
from mulligan.schema import (
    Episode,
    ExactMatchCheck,
    LLMJudgeCheck,
    Step,
    Task,
    ToolCall,
    ToolResult,
    Usage,
)
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel, tool_call

REFLECT_MARK = "You review a failed attempt"
JUDGE_MARK = "You grade an answer against a rubric"
ACTOR, REFLECTOR, JUDGE, SUMMARISER = (
    Usage(prompt_tokens=100, completion_tokens=10, cost=0.001),
    Usage(prompt_tokens=200, completion_tokens=20, cost=0.002),
    Usage(prompt_tokens=300, completion_tokens=30, cost=0.003),
    Usage(prompt_tokens=400, completion_tokens=40, cost=0.004),
)
TASK = Task(
    id="capital",
    prompt="What is the capital of Australia?",
    checks=[
        ExactMatchCheck(answer="Canberra", name="capital"),
        LLMJudgeCheck(rubric="Names a city.", name="judge"),
    ],
)
LESSON = "Recall that the capital of Australia is Canberra, not Sydney."


def role_policy(messages: list[dict[str, Any]], tools: Any) -> ChatResponse:
    """Each role answers with its own, known usage."""
    first = str(messages[0]["content"])
    if REFLECT_MARK in first:
        text = json.dumps({"diagnosis": LESSON, "lesson": ""})
        return ChatResponse(text=text, usage=REFLECTOR)
    if JUDGE_MARK in first:
        return ChatResponse(text='{"pass": true, "reason": "a city"}', usage=JUDGE)
    answer = "Canberra" if LESSON in json.dumps(messages) else "Sydney"
    return ChatResponse(text=answer, usage=ACTOR)


def times(usage: Usage, n: int) -> Usage:
    total = Usage()
    for _ in range(n):
        total = total + usage
    return total


def test_every_role_of_an_episode_is_counted_and_logged(tmp_path: Path) -> None:
    model = ScriptedModel(policy=role_policy)
    memory = Memory(tmp_path / "mem", HashEmbedding())
    loop = Loop(
        actor=Actor(model),
        evaluator=Evaluator(judge=model),
        settings=LoopSettings(strategy="reflexion", trials=2),
        reflector=Reflector(model),
        memory=memory,
    )
    episode = loop.run_episode(TASK, "ep-1")
    assert episode.passed and len(episode.attempts) == 2
    first, second = episode.attempts
    assert first.usage_by_role == {"actor": ACTOR, "judge": JUDGE, "reflector": REFLECTOR}
    assert second.usage_by_role == {"actor": ACTOR, "judge": JUDGE}
    assert first.usage == ACTOR + JUDGE + REFLECTOR
    assert episode.usage == times(ACTOR, 2) + times(JUDGE, 2) + REFLECTOR
    assert episode.usage_by_role["reflector"] == REFLECTOR
    # the log holds the same numbers: a report rebuilt from it counts every role
    logged = Memory(tmp_path / "mem", HashEmbedding()).log.episode("ep-1")
    assert logged is not None
    assert logged.attempts[0].usage_by_role == first.usage_by_role
    assert logged.usage == episode.usage
    row = next(memory.log.db.table("attempts").rows_where("id = ?", ["ep-1:1"]))
    assert row["prompt_tokens"] == 600 and row["completion_tokens"] == 60


def test_the_summarisers_calls_are_counted_apart_from_the_actors() -> None:
    @tool
    def read_page(page: int) -> str:
        """Read a page."""
        return f"page {page}: " + "lorem ipsum " * 80

    def policy(messages: list[dict[str, Any]], tools: Any) -> ChatResponse:
        if SUMMARISER_MARK in str(messages[0]["content"]):
            return ChatResponse(text="- read pages", usage=SUMMARISER)
        turns = sum(1 for m in messages if m["role"] == "assistant")
        if turns >= 3 or tools is None:
            return ChatResponse(text="done", usage=ACTOR)
        call = tool_call("read_page", page=len(messages))
        return ChatResponse(text="", tool_calls=[call], usage=ACTOR)

    model = ScriptedModel(policy=policy)
    compression = CompressionSettings(threshold_tokens=300, keep_recent=1, summary_max_tokens=50)
    attempt = Actor(model, ActorSettings(compression=compression)).run("t", "Read.", [read_page])
    folds = len(attempt.compressions)
    actor_calls = len(attempt.steps)
    assert folds >= 1 and attempt.stop_reason == "answered"
    assert attempt.usage_by_role == {
        "actor": times(ACTOR, actor_calls),
        "summariser": times(SUMMARISER, folds),
    }
    assert attempt.usage == times(ACTOR, actor_calls) + times(SUMMARISER, folds)


# ---------------------------------------------------------------- resume keeps the budget


def spent_steps(cost: float) -> list[Step]:
    usage = Usage(prompt_tokens=1000, completion_tokens=100, cost=cost)
    return [
        Step(
            index=n,
            tool_calls=[ToolCall(id=f"c{n}", name="add", arguments=json.dumps({"a": n, "b": 1}))],
            results=[ToolResult(call_id=f"c{n}", name="add", status="ok", output=str(n + 1))],
            usage=usage,
            latency_s=0.5,
        )
        for n in range(2)
    ]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_a_resumed_attempt_counts_what_it_spent_before_the_crash() -> None:
    model = ScriptedModel()  # any call fails the test: the budget is spent already
    budget = Budget(max_cost=1.0)
    attempt = Actor(model).run("t", "Add.", [add], budget=budget, resume=spent_steps(0.6))
    assert attempt.stop_reason == "max_cost"
    assert model.calls == []
    assert attempt.usage == Usage(prompt_tokens=2000, completion_tokens=200, cost=1.2)
    assert attempt.usage_by_role == {"actor": attempt.usage}


def test_a_resumed_attempt_keeps_its_token_budget() -> None:
    model = ScriptedModel()
    budget = Budget(max_tokens=2000)
    attempt = Actor(model).run("t", "Add.", [add], budget=budget, resume=spent_steps(0.0))
    assert attempt.stop_reason == "max_tokens" and model.calls == []


def test_a_resumed_attempt_counts_the_summariser_and_the_format_errors_before_the_crash() -> None:
    steps = spent_steps(0.0)
    steps[1].fold_usage = SUMMARISER
    reminder = Step(index=2, text="hmm", kind="format_error", feedback="Use a tool.", usage=ACTOR)
    model = ScriptedModel(["4"])
    settings = ActorSettings(budget=Budget(max_format_errors=2))
    attempt = Actor(model, settings).run("t", "Add.", [add], resume=[*steps, reminder])
    assert attempt.answer == "4"
    assert attempt.usage_by_role["summariser"] == SUMMARISER
    model2 = ScriptedModel()  # a second format error in a row would be one too many
    again = Actor(model2, ActorSettings(budget=Budget(max_format_errors=1)))
    stopped = again.run("t", "Add.", [add], resume=[*steps, reminder])
    assert stopped.stop_reason == "format_errors" and model2.calls == []


def test_resume_through_the_loop_restores_usage_from_the_log(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    task = Task(id="sum", prompt="What is 2 + 1?", tools=[], checks=[ExactMatchCheck(answer="3")])
    memory.start_episode(Episode(id="ep", task_id="sum", strategy="react"))
    for step in spent_steps(0.01):  # logged before a crash
        memory.log.log_step("ep", 1, step)
    model = ScriptedModel([ChatResponse(text="3", usage=ACTOR)])
    loop = Loop(
        actor=Actor(model, ActorSettings(budget=Budget(max_cost=1.0))),
        evaluator=Evaluator(),
        settings=LoopSettings(strategy="react", extra_tools=[add]),
        memory=memory,
    )
    episode = loop.run_episode(task, "ep")
    assert episode.passed
    prior = Usage(prompt_tokens=2000, completion_tokens=200, cost=0.02)
    assert episode.attempts[0].usage == prior + ACTOR
    logged = memory.log.episode("ep")
    assert logged is not None and logged.usage == prior + ACTOR
    model.assert_done()


# ---------------------------------------------------------------- max_seconds bounds the call


def test_a_slow_scripted_call_is_cut_off_at_max_seconds() -> None:
    model = ScriptedModel(["Canberra"], delay=5.0)
    actor = Actor(model, ActorSettings(budget=Budget(max_seconds=0.3)))
    attempt = actor.run("capital", TASK.prompt, [])
    assert attempt.stop_reason == "max_seconds"
    assert attempt.answer is None
    timeout = model.calls[0].timeout
    assert timeout is not None and 0 < timeout <= 0.3
    verdict = Evaluator().evaluate(TASK.model_copy(update={"checks": TASK.checks[:1]}), attempt)
    assert not verdict.passed


def test_the_client_stops_at_the_call_deadline_without_retrying() -> None:
    with FakeOpenAIServer([FakeReply(content="late", delay=3.0)] * 3) as server:
        model = OpenAIChatModel(
            "gpt-4o-mini", base_url=server.base_url, max_retries=2, sleep=lambda s: None
        )
        with pytest.raises(DeadlineExceeded):
            model.chat([{"role": "user", "content": "hi"}], timeout=0.3)
        assert len(server.requests) == 1


def cli_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}


TASK_FILE = """\
- id: capital
  prompt: What is the capital of Australia?
  checks:
    - {type: exact_match, answer: Canberra, name: capital}
"""


def test_max_seconds_through_the_cli_is_a_budget_stop_and_not_a_pass(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASK_FILE)
    with FakeOpenAIServer(policy=lambda body: FakeReply(content="Canberra", delay=3.0)) as server:
        done = subprocess.run(
            [sys.executable, "-m", "mulligan.cli", "run", str(tasks), "--json",
             "--base-url", server.base_url, "--model", "gpt-4o-mini",
             "--memory", str(tmp_path / "mem"), "--max-seconds", "1"],
            capture_output=True, text=True, timeout=120, env=cli_env(),
        )  # fmt: skip
    assert "Traceback" not in done.stderr
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert line["passed"] is False
    assert line["attempts"][0]["stop_reason"] == "max_seconds"
    assert line["attempts"][0]["answer"] is None


# ---------------------------------------------------------------- prices


def test_a_model_without_a_price_costs_unknown_not_zero() -> None:
    with FakeOpenAIServer([FakeReply(content="hi", usage=(1000, 10))]) as server:
        model = OpenAIChatModel("my-local-model", base_url=server.base_url)
        response = model.chat([{"role": "user", "content": "hi"}])
    assert response.usage.prompt_tokens == 1000
    assert response.usage.cost is None
    assert (response.usage + Usage(cost=0.5)).cost is None


def capital_policy(body: dict[str, Any]) -> FakeReply:
    if REFLECT_MARK in body["messages"][0]["content"]:
        reflection = {"diagnosis": LESSON, "lesson": ""}
        return FakeReply(content=json.dumps(reflection), usage=(200, 20))
    seen = LESSON in json.dumps(body["messages"])
    return FakeReply(content="Canberra" if seen else "Sydney", usage=(100, 10))


def run_cli(server: FakeOpenAIServer, tmp_path: Path, *extra: str) -> list[str]:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASK_FILE)
    return ["run", str(tasks), "--base-url", server.base_url, "--memory", str(tmp_path / "mem"),
            "--embedding", "hash", *extra]  # fmt: skip


def test_json_lines_carry_the_episode_usage_split_by_role(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(policy=capital_policy) as server:
        args = run_cli(server, tmp_path, "--strategy", "reflexion", "--trials", "2", "--json")
        assert main([*args, "--model", "m", "--price-in", "1", "--price-out", "2"]) == 0
    line = json.loads(capsys.readouterr().out.strip())
    usage = line["usage"]
    assert usage["by_role"]["actor"]["prompt_tokens"] == 200
    assert usage["by_role"]["reflector"]["prompt_tokens"] == 200
    assert usage["prompt_tokens"] == 400 and usage["completion_tokens"] == 40
    assert usage["total_tokens"] == 440
    assert usage["cost"] == pytest.approx((400 * 1 + 40 * 2) / 1e6)
    first = line["attempts"][0]["usage"]
    assert first["by_role"]["reflector"]["completion_tokens"] == 20


def test_unknown_price_is_null_in_json_and_unknown_in_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(policy=capital_policy) as server:
        # react answers Sydney: the run works and the task fails (exit 1)
        assert main([*run_cli(server, tmp_path, "--json"), "--model", "m"]) == 1
        assert main([*run_cli(server, tmp_path), "--model", "m"]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert json.loads(out[0])["usage"]["cost"] is None
    assert "cost unknown" in out[-1] and "$0.0000" not in out[-1]


def test_max_cost_with_an_unknown_price_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(policy=capital_policy) as server:
        code = main([*run_cli(server, tmp_path), "--model", "m", "--max-cost", "0.5"])
        assert server.requests == []
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "--max-cost" in err and "--price-in" in err
    assert not (tmp_path / "mem" / "episodes.db").exists()


def test_max_cost_is_enforced_with_a_price_from_mulligan_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mulligan.toml").write_text("[prices]\nm = {input = 1000000, output = 0}\n")
    monkeypatch.chdir(tmp_path)
    tasks = tmp_path / "tool_tasks.yaml"
    tasks.write_text(TASK_FILE.replace("  checks:", "  tools: [calculator]\n  checks:"))

    def keeps_calculating(body: dict[str, Any]) -> FakeReply:
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        call = {"name": "calculator", "arguments": {"expression": f"{turn} + 1"}}
        return FakeReply(content="", tool_calls=[call], usage=(100, 10))

    with FakeOpenAIServer(policy=keeps_calculating) as server:
        args = [*run_cli(server, tmp_path, "--model", "m", "--json", "--max-cost", "0.5")]
        args[1] = str(tasks)
        assert main(args) == 1  # stopped by the cost budget: the task fails
        assert len(server.requests) == 1
    line = json.loads(capsys.readouterr().out.strip())
    # 100 prompt tokens at $1 each: the first call spends the budget
    assert line["usage"]["cost"] == pytest.approx(100.0)
    assert line["attempts"][0]["stop_reason"] == "max_cost"


def test_prices_from_a_mulligan_prices_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m": {"input": 2.0, "output": 4.0}}))
    monkeypatch.setenv("MULLIGAN_PRICES", str(prices))
    with FakeOpenAIServer(policy=capital_policy) as server:
        assert main([*run_cli(server, tmp_path, "--json"), "--model", "m"]) == 1  # Sydney
    line = json.loads(capsys.readouterr().out.strip())
    assert line["usage"]["cost"] == pytest.approx((100 * 2 + 10 * 4) / 1e6)


@pytest.mark.parametrize(
    "flags",
    [["--price-in", "1"], ["--price-out", "1"], ["--price-in", "-1", "--price-out", "1"]],
)
def test_half_or_negative_price_flags_are_a_clear_error(
    tmp_path: Path, flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(policy=capital_policy) as server:
        code = main([*run_cli(server, tmp_path), "--model", "m", *flags])
        assert server.requests == []
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--price" in err


# ---------------------------------------------------------------- the report


def test_the_report_counts_every_role_and_shows_the_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASK_FILE)
    out = tmp_path / "bench"
    with FakeOpenAIServer(policy=capital_policy) as server:
        args = ["bench", str(tasks), "--strategies", "retry,reflexion", "--trials", "2",
                "--out", str(out), "--base-url", server.base_url, "--model", "m",
                "--embedding", "hash", "--price-in", "1", "--price-out", "1"]  # fmt: skip
        assert main(args) == 0
    run_id = capsys.readouterr().err.split("run id:")[1].split()[0]
    stats = collect(Memory(out / "memory").log, run_id)
    reflexion = next(s for s in stats.strategies if s.strategy == "reflexion")
    # actor 2 x (100+10), reflector 200+20
    assert reflexion.by_role["reflector"] == Usage(
        prompt_tokens=200, completion_tokens=20, cost=220 / 1e6
    )
    assert reflexion.prompt_tokens + reflexion.completion_tokens == 440
    assert reflexion.tokens_per_success == 440
    assert reflexion.cost_per_success == pytest.approx(440 / 1e6)
    report = (out / "report.md").read_text()
    assert "reflector" in report and "cost/success" in report


def test_the_report_shows_an_unknown_cost_as_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASK_FILE)
    out = tmp_path / "bench"
    with FakeOpenAIServer(policy=capital_policy) as server:
        args = ["bench", str(tasks), "--strategies", "react", "--trials", "1", "--out", str(out),
                "--base-url", server.base_url, "--model", "m", "--embedding", "hash"]  # fmt: skip
        assert main(args) == 0
    run_id = capsys.readouterr().err.split("run id:")[1].split()[0]
    react = collect(Memory(out / "memory").log, run_id).strategies[0]
    assert react.cost is None
    assert "unknown" in (out / "report.md").read_text()


@pytest.mark.parametrize("command", ["attempt", "bench", "task budget"])
def test_every_command_refuses_a_cost_budget_without_a_price(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks.yaml"
    budget = "  budget: {max_cost: 0.1}\n" if command == "task budget" else ""
    tasks.write_text(TASK_FILE.replace("  checks:", budget + "  checks:"))
    with FakeOpenAIServer(policy=capital_policy) as server:
        endpoint = ["--base-url", server.base_url, "--model", "m"]
        args = {
            "attempt": ["attempt", "2+2?", *endpoint, "--max-cost", "1"],
            "bench": ["bench", str(tasks), "--strategies", "react", "--out", str(tmp_path / "b"),
                      "--embedding", "hash", *endpoint, "--max-cost", "1"],
            "task budget": ["run", str(tasks), "--memory", str(tmp_path / "mem"), *endpoint],
        }[command]  # fmt: skip
        code = main(args)
        assert server.requests == []
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert ("budget.max_cost" if command == "task budget" else "--max-cost") in err
    assert not (tmp_path / "b").exists() and not (tmp_path / "mem").exists()


def test_a_log_from_before_the_split_migrates_and_reports_its_tokens_as_unsplit(
    tmp_path: Path,
) -> None:
    import sqlite3
    import time

    import sqlite_utils

    from mulligan.bench.report import role_rows
    from mulligan.memory.log import EpisodeLog, _m001_initial
    from mulligan.schema import Attempt, Verdict

    path = tmp_path / "episodes.db"
    old = sqlite_utils.Database(sqlite3.connect(path))
    old.table("migrations").create({"name": str, "applied_at": float}, pk="name")
    _m001_initial(old)
    old.table("migrations").insert({"name": "001_initial", "applied_at": time.time()})
    old.conn.commit()
    old.conn.close()
    log = EpisodeLog(path)  # applies the later migrations
    assert "usage_by_role" in log.db.table("attempts").columns_dict
    log.start_run("r", {"strategies": ["react"], "trials": 1, "task_order": ["t"]})
    episode = Episode(id="r:react:t", run_id="r", task_id="t", strategy="react")
    log.start_episode(episode)
    legacy = Attempt(task_id="t", usage=Usage(prompt_tokens=90, completion_tokens=10))
    episode.attempts, episode.verdicts = [legacy], [Verdict(passed=True, score=1.0)]
    log.log_attempt(episode, legacy, episode.verdicts[0])
    log.end_episode(episode)
    header, rows = role_rows(collect(log, "r"))
    assert rows[0][header.index("unsplit tok/task")] == "100"
    assert rows[0][header.index("actor tok/task")] == "0"


@pytest.mark.parametrize(
    "toml, prices_file, named",
    [
        ("[prices]\nm = 5\n", None, "price of 'm'"),
        ("[prices]\nm = {input = -1, output = 1}\n", None, "price of 'm'"),
        ("[prices]\nm = {input = 1}\n", None, "price of 'm'"),
        ("", "missing.json", "MULLIGAN_PRICES="),
        ("", "{not json", "MULLIGAN_PRICES="),
    ],
)
def test_bad_configured_prices_are_one_clear_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    toml: str,
    prices_file: str | None,
    named: str,
) -> None:
    (tmp_path / "mulligan.toml").write_text(toml)
    if prices_file == "{not json":
        (tmp_path / "bad.json").write_text(prices_file)
        monkeypatch.setenv("MULLIGAN_PRICES", str(tmp_path / "bad.json"))
    elif prices_file:
        monkeypatch.setenv("MULLIGAN_PRICES", str(tmp_path / prices_file))
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(policy=capital_policy) as server:
        code = main([*run_cli(server, tmp_path), "--model", "m"])
        assert server.requests == []
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and named in err, err
