"""A study's attempts per hour on one model server: the same HumanEval tasks, strategy and
settings at each `--concurrency`, and how many of them were solved.

Runs `mulligan bench humaneval --sample N --seed S --strategies STRATEGY --trials T` once per
concurrency level, each into a fresh directory (`--out`, one subdirectory per level), then
reads each run's episode log and prints one line per level: attempts made, tasks solved,
wall minutes and attempts per hour. Without `--base-url` the runs use the local model, which
gets a parallel slot per concurrent task; with it, any server (llama-cpp-python's, which
answers one request at a time, for the figure from before the prebuilt server). The model
server's start-up is inside the local model's wall time and outside an external server's:
compare lines at the same `--base-url`, or subtract the start-up the first line prints.

    pip install -e ".[local]"
    python benchmarks/attempts_per_hour.py [--concurrency 1,4] [--sample 12] [--base-url URL]
        [--threads N]                       # the local model's threads (the old default: 1)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from mulligan.memory.log import EpisodeLog
from mulligan.report.stats import collect


def bench_command(args: argparse.Namespace, concurrency: int, out: Path) -> list[str]:
    command = [sys.executable, "-m", "mulligan.cli", "bench", "humaneval"]
    command += ["--sample", str(args.sample), "--seed", str(args.seed)]
    command += ["--strategies", args.strategy, "--trials", str(args.trials)]
    command += ["--concurrency", str(concurrency), "--timeout", str(args.timeout)]
    command += ["--out", str(out)]
    if args.self_tests is not None:
        command += ["--self-tests", str(args.self_tests)]
    if args.base_url:
        command += ["--base-url", args.base_url, "--model", args.model]
    elif args.threads:
        command += ["--local-threads", str(args.threads)]
    return command


def figures(memory: Path) -> dict[str, float]:
    """Attempts, solved tasks, tokens and wall seconds of the newest run in this memory's
    log, as the report counts them (every strategy of the run together)."""
    log = EpisodeLog(memory / "episodes.db", read_only=True)
    run = log.runs()[-1]
    if run["status"] != "finished":
        raise SystemExit(f"{memory}: run {run['id']} ended {run['status']!r}; its figures mislead")
    stats = collect(log, run["id"])
    return {
        "attempts": sum(s.attempts for s in stats.strategies),
        "solved": sum(s.solved_by_trial[-1] for s in stats.strategies if s.solved_by_trial),
        "tasks": sum(s.tasks for s in stats.strategies),
        "seconds": (stats.ended_at or stats.started_at) - stats.started_at,
        "tokens": sum(s.prompt_tokens + s.completion_tokens for s in stats.strategies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,4", help="levels to run, in turn")
    parser.add_argument("--sample", type=int, default=12, help="HumanEval tasks (seeded)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--strategy", default="retry")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--self-tests", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per model call")
    parser.add_argument("--base-url", default=None, help="a running server (default: local)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="with --base-url")
    parser.add_argument("--threads", type=int, help="the local model's threads (default: its own)")
    parser.add_argument("--out", type=Path, default=Path("attempts-per-hour"))
    args = parser.parse_args()
    server = args.base_url or "the local model (a slot per concurrent task" + (
        f", {args.threads} threads)" if args.threads else ")"
    )
    print(f"HumanEval, {args.sample} tasks (seed {args.seed}), {args.strategy}, ", end="")
    print(f"{args.trials} trials, on {server}", flush=True)
    for concurrency in [int(n) for n in args.concurrency.split(",")]:
        out = args.out / f"concurrency-{concurrency}"
        if out.exists():
            raise SystemExit(f"{out} exists: give another --out, nothing is overwritten")
        started = time.perf_counter()
        done = subprocess.run(bench_command(args, concurrency, out), capture_output=True)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            sys.stderr.write(done.stderr.decode()[-2000:])
            raise SystemExit(f"the study at --concurrency {concurrency} failed")
        got = figures(out / "memory")
        per_hour = got["attempts"] / got["seconds"] * 3600
        print(
            f"  --concurrency {concurrency}: {got['attempts']} attempts, "
            f"{got['solved']}/{got['tasks']} solved, {got['tokens']:,} tokens, "
            f"run {got['seconds'] / 60:.1f} min (command {wall / 60:.1f} min), "
            f"{per_hour:.0f} attempts/hour",
            flush=True,
        )
        print("  " + json.dumps({"concurrency": concurrency, **got}), flush=True)


if __name__ == "__main__":
    main()
