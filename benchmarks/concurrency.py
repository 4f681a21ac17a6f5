"""Tasks run concurrently against an endpoint with fixed latency: wall time against the ideal.

100 one-call tasks, the fake OpenAI-compatible server (in a process of its own)
answering each call after 200 ms, at concurrency 1, 8 and 32. Each task is a
full episode: actor, evaluator and the SQLite episode log. Ideal = tasks x
calls x latency / concurrency; "waves" is the bound that whole calls allow,
ceil(tasks / concurrency) x latency (100 tasks at 32 need 4 rounds).

    python benchmarks/concurrency.py [--tasks 100] [--latency 0.2] [--levels 1,8,32]
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time

from mulligan.actor import ActorSettings
from mulligan.bench.runner import run_tasks
from mulligan.build import build_loop
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import ContainsCheck, Task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--levels", default="1,8,32")
    args = parser.parse_args()
    tasks = [
        Task(id=f"t{n}", prompt=f"Say ok ({n}).", checks=[ContainsCheck(text="ok")])
        for n in range(args.tasks)
    ]
    print(
        f"{'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'ratio':>6} "
        f"{'waves s':>8} {'ratio':>6} {'passed':>7}"
    )
    for level in [int(x) for x in args.levels.split(",")]:
        # the endpoint runs in its own process, as a real one would
        server = subprocess.Popen(
            [sys.executable, "-m", "mulligan.llm.fake_server", "ok", str(args.latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None and server.stdin is not None
        base_url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as home:
            model = OpenAIChatModel("fake", base_url=base_url, max_retries=0)
            memory = Memory(home, HashEmbedding())
            started = time.perf_counter()
            episodes = run_tasks(
                lambda model=model, memory=memory: build_loop(  # type: ignore[misc]
                    model, LoopSettings(strategy="react"), ActorSettings(), memory, "concurrency"
                ),
                tasks,
                run_id="concurrency",
                strategy="react",
                memory=memory,
                concurrency=level,
            )
            wall = time.perf_counter() - started
        server.stdin.close()
        server.wait(timeout=10)
        ideal = len(tasks) * args.latency / level
        waves = math.ceil(len(tasks) / level) * args.latency  # whole rounds of `level` calls
        passed = sum(e.passed for e in episodes)
        print(
            f"{level:>11} {wall:>8.2f} {ideal:>8.2f} {wall / ideal:>6.2f} "
            f"{waves:>8.2f} {wall / waves:>6.2f} {passed:>7}"
        )


if __name__ == "__main__":
    main()
