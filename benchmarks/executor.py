"""Threads against a local Ray: the same one-call tasks, wall time against the ideal.

200 one-call tasks, the fake OpenAI-compatible server (in a process of its own)
answering each call after 200 ms, at concurrency 8, 32 and 64; each task a full
episode (actor, evaluator, the SQLite episode log, which on Ray the driver writes
from the workers' messages). Ideal = tasks x latency / concurrency. "start s" is
what Ray pays before the first episode (the actor pool's processes), not counted
in "wall s"; threads start at once.

    python benchmarks/executor.py [--tasks 200] [--latency 0.2] [--levels 8,32,64]
"""

from __future__ import annotations

import argparse
import os
import time

from one_call_tasks import fake_endpoint, fresh_memory, run_react, say_ok_tasks

from mulligan.runs.executors import QUIET_RAY


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--levels", default="8,32,64")
    args = parser.parse_args()
    for key, value in QUIET_RAY.items():
        os.environ.setdefault(key, value)
    import ray

    from mulligan.runs.ray_executor import RayExecutor

    ray.init(include_dashboard=False, log_to_driver=False)
    tasks = say_ok_tasks(args.tasks)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    print(f"{args.tasks} tasks, {args.latency * 1000:.0f} ms a call; local Ray with {cpus} CPUs")
    print(
        f"{'executor':>8} {'concurrency':>11} {'start s':>8} {'wall s':>8} {'ideal s':>8} "
        f"{'ratio':>6} {'passed':>7}"
    )
    for level in [int(x) for x in args.levels.split(",")]:
        for name in ("threads", "ray"):
            with fake_endpoint(args.latency) as base_url, fresh_memory() as memory:
                executor = RayExecutor(None, concurrency=level) if name == "ray" else None
                started = time.perf_counter()
                if executor:
                    ray.get([w.__ray_ready__.remote() for w in executor._pool()])
                start = time.perf_counter() - started
                started = time.perf_counter()
                episodes = run_react(base_url, memory, tasks, level, executor)
                wall = time.perf_counter() - started
                if executor:
                    executor.close()
            ideal = len(tasks) * args.latency / level
            passed = sum(e.passed for e in episodes)
            print(
                f"{name:>8} {level:>11} {start:>8.2f} {wall:>8.2f} {ideal:>8.2f} "
                f"{wall / ideal:>6.2f} {passed:>7}"
            )
    ray.shutdown()


if __name__ == "__main__":
    main()
