"""The local model on this machine: tokens per second, seconds per HumanEval attempt and
peak memory.

Starts the `--model` (default `local`: the model of the `local` extra) on llama.cpp's
server as mulligan does, measures generation speed on a short prompt (`--repeat` times,
median), then runs one react attempt (one trial) on each of `--tasks` seeded HumanEval
problems and prints the seconds each took and how many passed. Peak memory is the
server's peak resident set (VmHWM, which counts the model file's mapped pages) and
mulligan's own. On a machine shared with other work the figures are slower than idle.

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" pip install --no-cache-dir -e ".[local]"
    python benchmarks/local_model.py [--model local:PATH.gguf] [--tasks 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import logging
import resource
import statistics
import time
from pathlib import Path

from mulligan.actor import ActorSettings
from mulligan.build import build_loop
from mulligan.llm import local_server
from mulligan.llm.connect import connect
from mulligan.loop import LoopSettings
from mulligan.run_config import EndpointSettings
from mulligan.tasks.suites import load_suite, select

PROMPT = "Write a Python function that returns the n-th Fibonacci number, with a docstring."


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="local or local:PATH.gguf")
    parser.add_argument("--tasks", type=int, default=3, help="HumanEval problems to attempt")
    parser.add_argument("--repeat", type=int, default=3, help="speed measurements (median)")
    parser.add_argument("--reply-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")

    started = time.perf_counter()
    model = connect(EndpointSettings(model=args.model))
    server = local_server.server_at(model.base_url)
    assert server is not None and server.process is not None
    print(f"model: {server.model.path} ({server.model.size / 1e9:.2f} GB)")
    print(f"server: {local_server.software()}, {server.threads} threads, {server.context} ctx")
    print(f"start (load, first token): {time.perf_counter() - started:.1f} s")

    rates, prompt_rates = [], []
    for _ in range(args.repeat):
        reply = model.chat([{"role": "user", "content": PROMPT}], max_tokens=args.reply_tokens)
        tokens = reply.usage.completion_tokens
        rates.append(tokens / reply.latency_s)
        prompt_rates.append(reply.usage.prompt_tokens)
    print(
        f"tokens per second: {statistics.median(rates):.1f} "
        f"(median of {args.repeat}; {args.reply_tokens}-token cap, "
        f"{prompt_rates[0]}-token prompt, prompt time included)"
    )

    suite = load_suite("humaneval")
    tasks = select(suite.tasks, sample=args.tasks, seed=args.seed)
    loop = build_loop(model, LoopSettings(strategy="react", trials=1), ActorSettings())
    seconds, passed, tokens_used = [], 0, 0
    for task in tasks:
        began = time.perf_counter()
        episode = loop.run_episode(task)
        seconds.append(time.perf_counter() - began)
        passed += episode.passed
        tokens_used += episode.usage.total_tokens
        print(f"  {task.id}: {seconds[-1]:.1f} s, {'passed' if episode.passed else 'failed'}")
    print(
        f"seconds per HumanEval attempt: {statistics.mean(seconds):.1f} mean, "
        f"{statistics.median(seconds):.1f} median over {len(seconds)} (react, one trial; "
        f"{passed}/{len(seconds)} passed, {tokens_used / len(seconds):.0f} tokens each)"
    )
    print(
        f"peak memory: server {peak_mb(server.process.pid):.0f} MB resident, "
        f"mulligan {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )
    local_server.stop_all()


if __name__ == "__main__":
    main()
