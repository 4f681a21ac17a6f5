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
import time

from one_call_tasks import fake_endpoint, fresh_memory, run_react, say_ok_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--levels", default="1,8,32")
    args = parser.parse_args()
    tasks = say_ok_tasks(args.tasks)
    print(
        f"{'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'ratio':>6} "
        f"{'waves s':>8} {'ratio':>6} {'passed':>7}"
    )
    for level in [int(x) for x in args.levels.split(",")]:
        with fake_endpoint(args.latency) as base_url, fresh_memory() as memory:
            started = time.perf_counter()
            episodes = run_react(base_url, memory, tasks, level)
            wall = time.perf_counter() - started
        ideal = len(tasks) * args.latency / level
        waves = math.ceil(len(tasks) / level) * args.latency  # whole rounds of `level` calls
        passed = sum(e.passed for e in episodes)
        print(
            f"{level:>11} {wall:>8.2f} {ideal:>8.2f} {wall / ideal:>6.2f} "
            f"{waves:>8.2f} {wall / waves:>6.2f} {passed:>7}"
        )


if __name__ == "__main__":
    main()
