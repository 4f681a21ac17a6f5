"""Every token counted, by role; a resumed attempt keeps its budget; time is counted too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mulligan.actor import Actor, ActorSettings, BudgetSection, CompressionSection, tool
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
from tests.helpers.long_task import SUMMARISER_MARK

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
    compression = CompressionSection(threshold_tokens=300, keep_recent=1, summary_max_tokens=50)
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
    budget = BudgetSection(max_cost=1.0)
    attempt = Actor(model).run("t", "Add.", [add], budget=budget, resume=spent_steps(0.6))
    assert attempt.stop_reason == "max_cost"
    assert model.calls == []
    assert attempt.usage == Usage(prompt_tokens=2000, completion_tokens=200, cost=1.2)
    assert attempt.usage_by_role == {"actor": attempt.usage}


def test_a_resumed_attempt_keeps_its_token_budget() -> None:
    model = ScriptedModel()
    budget = BudgetSection(max_tokens=2000)
    attempt = Actor(model).run("t", "Add.", [add], budget=budget, resume=spent_steps(0.0))
    assert attempt.stop_reason == "max_tokens" and model.calls == []


def test_a_resumed_attempt_counts_the_summariser_and_the_format_errors_before_the_crash() -> None:
    steps = spent_steps(0.0)
    steps[1].fold_usage = SUMMARISER
    reminder = Step(index=2, text="hmm", kind="format_error", feedback="Use a tool.", usage=ACTOR)
    model = ScriptedModel(["4"])
    settings = ActorSettings(budget=BudgetSection(max_format_errors=2))
    attempt = Actor(model, settings).run("t", "Add.", [add], resume=[*steps, reminder])
    assert attempt.answer == "4"
    assert attempt.usage_by_role["summariser"] == SUMMARISER
    model2 = ScriptedModel()  # a second format error in a row would be one too many
    again = Actor(model2, ActorSettings(budget=BudgetSection(max_format_errors=1)))
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
        actor=Actor(model, ActorSettings(budget=BudgetSection(max_cost=1.0))),
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
    actor = Actor(model, ActorSettings(budget=BudgetSection(max_seconds=0.3)))
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
