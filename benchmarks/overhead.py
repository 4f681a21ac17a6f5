"""Framework overhead per actor step, model latency removed.

The same 20-step tool-using task (call `add` 20 times, then answer) against the
same local fake OpenAI-compatible server with zero delay, run by mulligan's
actor, LangGraph's prebuilt ReAct agent and smolagents' ToolCallingAgent, each
through its normal OpenAI client. Prints steps per second and microseconds per
step (a step = one model call and its tool results), median of --repeat runs.
The server runs in a process of its own; "bare http" is a plain keep-alive
HTTP loop sending the same growing history, and a framework's overhead is its
time per step above that floor. Beside the wall clock it prints the client process's CPU time
per step (every thread of it; the server's is its own), and the overhead in CPU above bare
HTTP's: on a machine shared with other work, the wall clock swings with the load, the CPU
time much less.

    pip install -e ".[bench]" && python benchmarks/overhead.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from mulligan.actor import Actor, ActorSettings, BudgetSection, CompressionSection, tool
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.testing import FakeOpenAIServer, FakeReply

STEPS = 20
PROMPT = f"Add 1 to 0, {STEPS} times in a row with the add tool, then say the result."
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def _is_observation(message: dict[str, Any]) -> bool:
    """A tool result: a `tool` message, or smolagents' `Observation:` user message."""
    if message.get("role") == "tool":
        return True
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(str(part.get("text", "")) for part in content)
    return message.get("role") == "user" and str(content).startswith("Observation:")


def policy(body: dict[str, Any]) -> FakeReply:
    """Tool calls until 20 results are in, then the answer (smolagents: its final_answer tool)."""
    done = sum(1 for m in body["messages"] if _is_observation(m))
    names = [t["function"]["name"] for t in body.get("tools") or []]
    if done < STEPS:
        return FakeReply(content="", tool_calls=[{"name": "add", "arguments": {"a": done, "b": 1}}])
    if "final_answer" in names:
        return FakeReply(
            content="", tool_calls=[{"name": "final_answer", "arguments": {"answer": str(STEPS)}}]
        )
    return FakeReply(content=str(STEPS))


Task = Callable[[], int]
"""Runs the task once and returns the number of model calls."""


def setup_mulligan(base_url: str) -> Task:
    @tool
    def add(a: int, b: int) -> str:
        """Use to add two integers."""
        return str(a + b)

    model = OpenAIChatModel("fake", base_url=base_url, api_key="k")
    settings = ActorSettings(
        budget=BudgetSection(max_steps=STEPS + 5), compression=CompressionSection(enabled=False)
    )
    actor = Actor(model, settings)

    def task() -> int:
        attempt = actor.run("overhead", PROMPT, [add])
        assert attempt.answer == str(STEPS), attempt.answer
        return len(attempt.steps)

    return task


def setup_langgraph(base_url: str) -> Task:
    from langchain_core.tools import tool as lc_tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent
    from pydantic import SecretStr

    @lc_tool
    def add(a: int, b: int) -> str:
        """Use to add two integers."""
        return str(a + b)

    llm = ChatOpenAI(model="fake", base_url=base_url, api_key=SecretStr("k"), max_retries=0)
    agent = create_react_agent(llm, [add])

    def task() -> int:
        result = agent.invoke({"messages": [("user", PROMPT)]}, {"recursion_limit": 100})
        assert result["messages"][-1].content == str(STEPS)
        return sum(1 for m in result["messages"] if m.type == "ai")

    return task


def setup_smolagents(base_url: str) -> Task:
    from smolagents import OpenAIServerModel, ToolCallingAgent
    from smolagents import tool as smol_tool

    @smol_tool
    def add(a: int, b: int) -> str:
        """Use to add two integers.

        Args:
            a: the first integer
            b: the second integer
        """
        return str(a + b)

    model = OpenAIServerModel(model_id="fake", api_base=base_url, api_key="k")
    agent = ToolCallingAgent(tools=[add], model=model, max_steps=STEPS + 5, verbosity_level=0)

    def task() -> int:
        answer = agent.run(PROMPT, reset=True)
        assert str(answer) == str(STEPS), answer
        return len(agent.memory.steps) - 1  # minus the task step

    return task


def setup_bare_http(base_url: str) -> Task:
    """The floor: a plain keep-alive HTTP loop that sends the same growing history."""
    import httpx

    client = httpx.Client(base_url=base_url, headers={"Authorization": "Bearer k"})

    def task() -> int:
        messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
        calls = 0
        while True:
            calls += 1
            reply = client.post("/chat/completions", json={"model": "fake", "messages": messages})
            message = reply.json()["choices"][0]["message"]
            if not message.get("tool_calls"):
                return calls
            messages.append({**message, "content": message["content"] or ""})
            for call in message["tool_calls"]:
                arguments = json.loads(call["function"]["arguments"])
                result = str(arguments["a"] + arguments["b"])
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})

    return task


RUNNERS: dict[str, Callable[[str], Task]] = {
    "bare http": setup_bare_http,
    "mulligan": setup_mulligan,
    "langgraph": setup_langgraph,
    "smolagents": setup_smolagents,
}


def serve() -> None:
    """The fake endpoint, alone in its own process so its work is not charged to the client."""
    with FakeOpenAIServer(policy=policy) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", help="comma-separated subset of " + ",".join(RUNNERS))
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    logging.disable(logging.WARNING)
    chosen = args.only.split(",") if args.only else list(RUNNERS)
    if "bare http" not in chosen:
        chosen.insert(0, "bare http")
    results: dict[str, tuple[float, float, int] | str] = {}
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    base_url = server.stdout.readline().strip()
    try:
        for name in chosen:
            try:
                task = RUNNERS[name](base_url)  # imports, clients, agent: not timed
                task()  # warm-up
                times, cpu, steps = [], [], 0
                for _ in range(args.repeat):
                    started, used = time.perf_counter(), time.process_time()
                    steps = task()
                    times.append(time.perf_counter() - started)
                    cpu.append(time.process_time() - used)
                results[name] = (statistics.median(times), statistics.median(cpu), steps)
            except ImportError as exc:
                results[name] = f"not installed ({exc.name}); pip install -e '.[bench]'"
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    print_table(results)
    print(json.dumps({"steps": STEPS, "repeat": args.repeat, "cpus": os.cpu_count()}))


def print_table(results: dict[str, tuple[float, float, int] | str]) -> None:
    floor = results["bare http"]
    assert isinstance(floor, tuple)
    measured = {name: value for name, value in results.items() if isinstance(value, tuple)}
    per_step = {name: (w / n * 1e6, c / n * 1e6) for name, (w, c, n) in measured.items()}
    wall_floor, cpu_floor = per_step["bare http"]
    over = {name: (w - wall_floor, c - cpu_floor) for name, (w, c) in per_step.items()}
    mine = over.get("mulligan")
    print(
        f"{'framework':<12} {'calls':>6} {'steps/s':>9} {'µs/step':>9} "
        f"{'overhead µs/step':>17} {'overhead × mulligan':>20} {'CPU µs/step':>12} "
        f"{'CPU overhead':>13} {'CPU × mulligan':>15}"
    )
    for name, value in results.items():
        if isinstance(value, str):
            print(f"{name:<12} {value}")
            continue
        seconds, _, steps = value
        wall, cpu = over[name]
        mulligan = mine and name not in ("bare http", "mulligan")
        ratio = f"{wall / mine[0]:.2f}" if mulligan and mine else "-"
        cpu_ratio = f"{cpu / mine[1]:.2f}" if mulligan and mine else "-"
        print(
            f"{name:<12} {steps:>6} {steps / seconds:>9.1f} {seconds / steps * 1e6:>9.0f} "
            f"{wall:>17.0f} {ratio:>20} {per_step[name][1]:>12.0f} {cpu:>13.0f} {cpu_ratio:>15}"
        )


if __name__ == "__main__":
    main()
