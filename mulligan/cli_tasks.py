"""`mulligan run` and `mulligan tasks`: suites and task files from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import Any

from mulligan import display
from mulligan.bench.runner import make_loop, manifest, run_tasks
from mulligan.config import Settings
from mulligan.errors import UserError
from mulligan.llm.base import ChatModel
from mulligan.loop import STRATEGIES, LoopSettings
from mulligan.memory import Memory, ValidityRules, make_embedder
from mulligan.schema import Episode, Task
from mulligan.tasks.suites import Suite, load_suite, select

DEFAULT_MEMORY = "~/.mulligan"


def add_selection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", help="humaneval, mbpp, hotpotqa, examples, or a task file/dir")
    parser.add_argument("--data", help="the dataset file for mbpp or hotpotqa")
    parser.add_argument("--feedback", choices=["em", "hidden"], default="em", help="hotpotqa")
    parser.add_argument("--limit", type=int, help="the first N tasks")
    parser.add_argument("--ids", help="comma-separated task ids")
    parser.add_argument("--sample", type=int, help="a seeded random sample of N tasks")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--network", action="store_true", help="let the box reach the network (default: none)"
    )


def selected(args: argparse.Namespace) -> Suite:
    suite = load_suite(args.suite, data=args.data, feedback=args.feedback)
    ids = [i.strip() for i in args.ids.split(",")] if args.ids else None
    suite.tasks = select(suite.tasks, ids=ids, limit=args.limit, sample=args.sample, seed=args.seed)
    if getattr(args, "network", False):
        suite.tasks = [task.model_copy(update={"network": True}) for task in suite.tasks]
    return suite


def cmd_tasks(args: argparse.Namespace) -> int:
    suite = selected(args)
    for task in suite.tasks:
        kinds = ", ".join(f"{c.type}{'*' if c.visibility == 'hidden' else ''}" for c in task.checks)
        print(f"{task.id}\t{task.family}\ttools: {','.join(task.tools) or '-'}\tchecks: {kinds}")
    print(f"{len(suite.tasks)} tasks valid (* = hidden check)", file=sys.stderr)
    return 0


def open_memory(
    settings: Settings,
    endpoint: ChatModel | None = None,
    rules: ValidityRules | None = None,
    default: str = DEFAULT_MEMORY,
) -> Memory:
    """The memory the settings name: a directory, or a chroma URL with the log in `default`."""
    location = settings.memory or default
    spec = settings.embedding

    def embedder() -> Any:
        return make_embedder(spec, endpoint)  # type: ignore[arg-type]

    if location.startswith(("http://", "https://")):
        return Memory(default, embedder, store=location, rules=rules)
    return Memory(location, embedder, rules=rules)


def validity_rules(args: argparse.Namespace) -> ValidityRules:
    return ValidityRules(
        validate_after=args.validate_after,
        refute_after=args.refute_after,
        ttl_days=args.lesson_ttl_days,
    )


def episode_json(episode: Episode) -> str:
    return json.dumps(
        {
            "task_id": episode.task_id,
            "strategy": episode.strategy,
            "passed": episode.passed,
            "attempts": [
                {
                    "trial": a.trial,
                    "stop_reason": a.stop_reason,
                    "answer": a.answer,
                    "usage": a.usage.model_dump() | {"total_tokens": a.usage.total_tokens},
                    "verdict": v.model_dump(),
                }
                for a, v in zip(episode.attempts, episode.verdicts, strict=False)
            ],
        }
    )


def cmd_run(
    args: argparse.Namespace,
    settings: Settings,
    model: ChatModel,
    actor_settings: Any,
    suite: Suite,
) -> int:
    if args.strategy not in STRATEGIES:
        raise UserError(f"unknown strategy {args.strategy!r}: use one of {', '.join(STRATEGIES)}")
    memory = open_memory(settings, model, validity_rules(args))
    run_id = args.resume or uuid.uuid4().hex[:10]
    if not args.resume:
        memory.log.start_run(
            run_id,
            manifest(
                command="run",
                suite=args.suite,
                model=model.name,
                endpoint=settings.base_url or "api.openai.com",
                temperature=settings.temperature,
                budget=vars(actor_settings.budget),
                strategies=[args.strategy],
                trials=args.trials,
                carry=args.carry,
                min_similarity=args.min_similarity,
                seed=args.seed,
                tasks=[t.id for t in suite.tasks],
            ),
        )
    print(f"run id: {run_id}", file=sys.stderr)

    def report(task: Task, episode: Episode) -> None:
        if args.json:
            print(episode_json(episode), flush=True)
        else:
            for attempt, verdict in zip(episode.attempts, episode.verdicts, strict=False):
                print(
                    display.verdict_line(f"{task.id} (trial {attempt.trial})", verdict), flush=True
                )

    episodes = run_tasks(
        lambda: make_loop(
            model,
            actor_settings,
            LoopSettings(
                strategy=args.strategy,
                trials=args.trials,
                extra_tools=suite.tools,
                carry=args.carry,
                min_similarity=args.min_similarity,
            ),
            memory,
            run_id,
        ),
        suite.tasks,
        run_id=run_id,
        strategy=args.strategy,
        memory=memory,
        concurrency=args.concurrency,
        on_episode=report,
    )
    memory.log.end_run(run_id)
    if not args.json:
        print(display.run_summary(episodes))
    print(f"run id: {run_id}", file=sys.stderr)
    return 0
