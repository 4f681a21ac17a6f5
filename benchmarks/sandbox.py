"""The cost of the box: one trivial run under each backend and with limits only.

Measures, for each setting available here, the median and p90 wall time of
  - a trivial `python_tests` check (one assert; the two-process harness),
  - the `python` tool (`print(1)` in a scratch workspace),
  - `run_shell("true")`,
and prints what each backend adds over limits only. Settings: `rlimits` (resource limits
only, as on machines without namespaces), `bwrap` (bubblewrap, where installed) and
`unshare` (util-linux unshare and mulligan's box_init).

    python benchmarks/sandbox.py [--runs 40]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mulligan import sandbox
from mulligan.actor.builtin_tools import Workspace
from mulligan.actor.tools import ToolRegistry
from mulligan.evaluator import Evaluator
from mulligan.sandbox import levels as levels_module
from mulligan.schema import Attempt, PythonTestsCheck, Task, ToolCall

TASK = Task(
    id="bench/add",
    prompt="add",
    checks=[PythonTestsCheck(tests="assert add(2, 3) == 5", entry_point="add")],
)
ATTEMPT = Attempt(task_id="bench/add", answer="```python\ndef add(a, b):\n    return a + b\n```")


FAILED: list[str] = []
"""Runs that did not give the expected output (on a starved machine: timeouts), said at the end."""


CPU: dict[int, list[float]] = {}
"""CPU ms (mulligan and every process of the run, user + system) per run, by the times list:
on a machine where others hold the cores, wall time measures them, CPU time the box."""


def timed(action: Callable[[], object], runs: int) -> list[float]:
    attempt(action)  # warm up (imports, the containment probe)
    times: list[float] = []
    cpu = CPU.setdefault(id(times), [])
    for _ in range(runs):
        started, used = time.perf_counter(), cpu_seconds()
        attempt(action)
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((cpu_seconds() - used) * 1000)
    return times


def cpu_seconds() -> float:
    mine, theirs = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return mine.ru_utime + mine.ru_stime + theirs.ru_utime + theirs.ru_stime


def attempt(action: Callable[[], object]) -> None:
    try:
        action()
    except AssertionError as exc:
        FAILED.append(str(exc).splitlines()[0])


def measure(level: str, runs: int) -> dict[str, list[float]]:
    os.environ["MULLIGAN_SANDBOX"] = level
    sandbox.containment.cache_clear()
    box = sandbox.containment()
    assert (box.backend or box.level) == level, box
    evaluator = Evaluator()

    def check() -> None:
        verdict = evaluator.evaluate(TASK, ATTEMPT)
        assert verdict.passed, f"{level}: {verdict.checks[0].detail}"

    with tempfile.TemporaryDirectory() as scratch:
        tools = ToolRegistry.of(Workspace(Path(scratch), scratch=True).tools())
        call = ToolCall(id="1", name="python", arguments='{"code": "print(1)"}')

        def python_tool() -> None:
            output = tools.run(call).output
            assert output.strip() == "1", f"{level}: {output}"

        return {
            "python_tests check": timed(check, runs),
            "python tool": timed(python_tool, runs),
            "run_shell('true')": timed(lambda: sandbox.run_shell("true"), runs),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    levels = ["rlimits"]
    for backend in levels_module.NAMES:
        problem = levels_module.probe(backend)
        if problem is None:
            levels.append(backend)
        else:
            print(f"{backend} unavailable here: {problem}")
    results = {level: measure(level, args.runs) for level in levels}
    print(f"{args.runs} runs each, {os.cpu_count()} cores, uid {os.geteuid()}")
    heads = " | ".join(f"{lv} median (p90) ms" for lv in levels)
    added = " | ".join(f"{lv} adds" for lv in levels[1:])
    print(f"| what | {heads} | {added} |")
    print(f"|---|{'---|' * (2 * len(levels) - 1)}")
    for name in results["rlimits"]:
        cells, medians = [], []
        for level in levels:
            times = results[level][name]
            medians.append(statistics.median(times))
            cells.append(f"{medians[-1]:.1f} ({statistics.quantiles(times, n=10)[-1]:.1f})")
        more = [f"{m - medians[0]:+.1f} ms" for m in medians[1:]]
        print(f"| {name} | {' | '.join(cells + more)} |")
    print("\nCPU time per run (user + system, mulligan and the run's processes), median ms")
    print(f"| what | {' | '.join(levels)} | {added} |")
    print(f"|---|{'---|' * (2 * len(levels) - 1)}")
    for name in results["rlimits"]:
        used = [statistics.median(CPU[id(results[level][name])]) for level in levels]
        more = [f"{u - used[0]:+.1f} ms" for u in used[1:]]
        print(f"| {name} | {' | '.join(f'{u:.1f}' for u in used)} | {' | '.join(more)} |")
    for failure in FAILED:
        print(f"failed run (counted in the times): {failure}")


if __name__ == "__main__":
    main()
