"""Prices: unknown is not zero; flags, mulligan.toml and a prices file; cost budgets, and the
report's usage by role."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.memory import Memory
from mulligan.report.stats import collect
from mulligan.schema import (
    Episode,
    Usage,
)
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.llm.test_ledger import (
    LESSON,
    REFLECT_MARK,
    TASK_FILE,
)

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


def test_unknown_price_is_null_in_json_and_not_priced_in_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(policy=capital_policy) as server:
        # react answers Sydney: the run works and the task fails (exit 1)
        assert main([*run_cli(server, tmp_path, "--json"), "--model", "m"]) == 1
        assert main([*run_cli(server, tmp_path), "--model", "m"]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert json.loads(out[0])["usage"]["cost"] is None
    assert "not priced" in out[-1] and "$" not in out[-1]


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

    from mulligan.memory.log import EpisodeLog
    from mulligan.memory.migrations import _m001_initial
    from mulligan.report.report import role_rows
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
        ("", "[" * 100_000, "MULLIGAN_PRICES="),
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
    if prices_file and prices_file.startswith(("{", "[")):
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
