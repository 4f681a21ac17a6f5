"""`mulligan run` and `mulligan tasks`: suites and task files from the command line."""

from __future__ import annotations

import argparse
import json
import sys

from mulligan import display, strategies, validate
from mulligan.bench.executors import open_executor
from mulligan.bench.runner import run_tasks, self_tests_for
from mulligan.build import build_loop
from mulligan.cli import mcp as cli_mcp
from mulligan.cli.common import log_to_resume, open_memory, selected, usage_json
from mulligan.cli.local import REPORTER
from mulligan.cli.style import Progress, marked, table
from mulligan.config import load_config
from mulligan.defaults import DEFAULT_MEMORY
from mulligan.evaluator.self_tests import SelfTestWriter
from mulligan.lifecycle import lifecycle, manifest, new_run_id
from mulligan.llm.base import ChatModel
from mulligan.llm.connect import connect, connect_feedback, local_fields
from mulligan.llm.pricing import require_price_for_cost_budget
from mulligan.run_config import RunConfig
from mulligan.schema import Episode, Task
from mulligan.tasks.suites import Suite


def cmd_tasks(args: argparse.Namespace) -> int:
    load_config(vars(args))  # a bad mulligan.toml or MULLIGAN_* variable fails here, as in run
    suite = selected(args)
    if getattr(args, "json", False):
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
    config = load_config(vars(args))
    suite = selected(args)  # a bad suite or file is reported before connecting
    strategy = strategies.get(args.strategy)
    if strategy.uses_store:
        validate.embedding_available(config.run.embedding)
    repeated = strategy.repeats and config.loop.trials > 1
    model = connect(
        config.endpoint, default_temperature=0.7 if repeated else 0.0, reporter=REPORTER
    )
    given = config.given("budget.max_cost")
    require_price_for_cost_budget(model.name, model.price, given, suite.tasks)
    with cli_mcp.suite_with_mcp(suite, config.run.mcp) as suite:
        return _run_suite(args, config, model, suite)


def _run_suite(args: argparse.Namespace, config: RunConfig, model: ChatModel, suite: Suite) -> int:
    strategy = strategies.get(args.strategy)
    run_id = new_run_id(args.resume)
    wanted = manifest(
        config,
        command="run",
        suite=args.suite,
        model=model.name,
        **{"endpoint": config.endpoint.base_url or "api.openai.com", **local_fields(model)},
        temperature=config.endpoint.temperature,
        strategies=[args.strategy],
        seed=args.seed,
        tasks=[t.id for t in suite.tasks],
    )
    if args.resume:
        log_to_resume(config, run_id)
    concurrency, self_tests = config.run.concurrency, config.loop.self_tests
    executor = open_executor(
        args.executor, args.ray_address, concurrency=concurrency,
        memory_location=config.run.memory or DEFAULT_MEMORY,
        uses_store=strategy.uses_store,
    )  # fmt: skip
    memory = open_memory(config, model)
    if strategy.uses_store and executor is None:  # on Ray, the workers open it
        memory.store  # noqa: B018  a missing embedding model stops the run before any task

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

    policy = suite.hidden(config.policy())  # the answers and settings files stay out of the box
    feedback = connect_feedback(config.reflector, config.endpoint, REPORTER)
    writer = SelfTestWriter(feedback or model, policy.hiding(memory.directory))
    try:
        with lifecycle(memory.log, run_id, wanted, bool(args.resume)):
            print(f"run id: {run_id}", file=sys.stderr)
            with progress.shown():
                episodes = run_tasks(
                    lambda: build_loop(
                        model,
                        config.loop_settings(args.strategy, extra_tools=suite.tools),
                        config.actor_settings(),
                        memory,
                        run_id,
                        policy=policy,
                        feedback=feedback,
                    ),
                    suite.tasks,
                    run_id=run_id,
                    strategy=args.strategy,
                    memory=memory,
                    concurrency=concurrency,
                    on_episode=report,
                    executor=executor,
                    prepare=self_tests_for(memory.log, run_id, writer, self_tests)
                    if self_tests
                    else None,
                )
    finally:
        if executor:
            executor.close()
    if not args.json:
        print(display.run_summary(episodes))
    print(f"run id: {run_id}", file=sys.stderr)
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
