"""`mulligan run` and `mulligan tasks`: suites and task files from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mulligan import strategies
from mulligan.cli import display
from mulligan.cli import mcp as cli_mcp
from mulligan.cli.common import selected, selection_of
from mulligan.cli.output import marked, table
from mulligan.cli.pipeline import Pipeline, RunRequest, opened
from mulligan.cli.progress import Progress
from mulligan.evaluator.self_tests import SelfTestWriter
from mulligan.runs.build import box_policy
from mulligan.runs.lifecycle import task_digests
from mulligan.runs.paired_draws import draws_from, resolved_directory
from mulligan.runs.runner import run_tasks, self_tests_for
from mulligan.schema import Episode, Role, Task, Usage
from mulligan.settings.loading import load_config
from mulligan.settings.run_config import RunConfig
from mulligan.tasks.suites import Suite


def cmd_tasks(args: argparse.Namespace) -> int:
    load_config(vars(args))  # a bad mulligan.toml or MULLIGAN_* variable fails here, as in run
    suite = selected(args)
    if args.json:
        for task in suite.tasks:
            print(task.model_dump_json())
    else:
        rows = []
        for task in suite.tasks:
            kinds = ", ".join(
                f"{c.type}{'*' if c.visibility == 'hidden' else ''}" for c in task.checks
            )
            rows.append([task.id, task.family, ",".join(task.tools) or "-", kinds])
        plain = [f"{i}\t{f}\ttools: {t}\tchecks: {k}" for i, f, t, k in rows]
        table(["task", "family", "tools", "checks"], rows, plain, sys.stdout)
    print(f"{len(suite.tasks)} tasks valid (* = hidden check)", file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    config, suite, request = plan_run(args)
    with (
        cli_mcp.suite_with_mcp(suite, config.run.mcp) as suite,
        opened(config, request, suite.hidden(box_policy(config))) as run,
    ):
        return _run_suite(args, run, suite)


def plan_run(args: argparse.Namespace) -> tuple[RunConfig, Suite, RunRequest]:
    """What `run` states: its selection of tasks and its one strategy (a bad suite or file
    is reported here, before connecting)."""
    config = load_config(vars(args))
    suite = selected(args)
    strategies.for_loop(args.strategy, "--strategy")  # one the loop runs, or a UserError
    tasks = suite.tasks
    selection = {
        **selection_of(args),
        "tasks": [t.id for t in tasks],
        "task_digests": task_digests(tasks),
        **({"draws_from": resolved_directory(args.draws_from)} if args.draws_from else {}),
    }
    request = RunRequest(
        command="run",
        strategies=[args.strategy],
        selection=selection,
        tasks=tasks,
        resume=args.resume,
        executor=args.executor,
        ray_address=args.ray_address,
    )
    return config, suite, request


def _run_suite(args: argparse.Namespace, run: Pipeline, suite: Suite) -> int:
    progress = Progress(len(suite.tasks))

    def report(task: Task, episode: Episode) -> None:
        progress.advance(
            args.strategy, episode.passed, episode.usage.total_tokens, episode.usage.cost
        )
        if args.json:
            print(episode_json(episode), flush=True)
        else:
            for attempt, verdict in zip(episode.attempts, episode.verdicts, strict=False):
                line = display.verdict_line(f"{task.id} (trial {attempt.trial})", verdict)
                print(marked(line), flush=True)

    self_tests = run.config.loop.self_tests
    baseline = (
        draws_from(args.draws_from, run.manifest(), run.memory.log.path)
        if args.draws_from
        else None
    )
    writer = SelfTestWriter(run.reflector, run.policy)
    with run.running():
        print(f"run id: {run.run_id}", file=sys.stderr)
        if baseline and self_tests:
            baseline.share_self_tests(run.memory.log, run.run_id)
        with progress.shown():
            episodes = run_tasks(
                run.make_loop(args.strategy, extra_tools=suite.tools),
                suite.tasks,
                run_id=run.run_id,
                strategy=args.strategy,
                memory=run.memory,
                concurrency=run.config.run.concurrency,
                on_episode=report,
                drawn=baseline,
                executor=run.executor,
                prepare=self_tests_for(run.memory.log, run.run_id, writer, self_tests)
                if self_tests
                else None,
            )
    if not args.json:
        print(display.run_summary(episodes))
    print(f"run id: {run.run_id}", file=sys.stderr)
    failed_endpoint = endpoint_failures(episodes)
    return 1 if failed_endpoint or not all(episode.passed for episode in episodes) else 0


def episode_json(episode: Episode) -> str:
    return json.dumps(
        {
            "task_id": episode.task_id,
            "strategy": episode.strategy,
            "passed": episode.passed,
            "usage": usage_json(episode.usage, episode.usage_by_role),
            "attempts": [
                {
                    "trial": a.trial,
                    "stop_reason": a.stop_reason,
                    "answer": a.answer,
                    "usage": usage_json(a.usage, a.usage_by_role),
                    "verdict": v.model_dump(),
                }
                for a, v in zip(episode.attempts, episode.verdicts, strict=False)
            ],
        }
    )


def usage_json(usage: Usage, by_role: dict[Role, Usage]) -> dict[str, Any]:
    """Tokens and cost (null when the price is unknown), and the same split by role."""
    return usage.as_json() | {"by_role": {role: u.as_json() for role, u in by_role.items()}}


def endpoint_failures(episodes: list[Episode]) -> int:
    """1 when an attempt stopped because the endpoint failed (and say so), else 0."""
    failed = [a for e in episodes for a in e.attempts if a.stop_reason == "model_error"]
    if not failed:
        return 0
    first = failed[0].error.splitlines()[0] if failed[0].error else "no detail"
    print(
        f"mulligan: {len(failed)} attempt(s) stopped with model_error; first: {first}",
        file=sys.stderr,
    )
    return 1
