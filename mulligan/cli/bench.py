"""`mulligan bench`, `mulligan report` and `mulligan demo`."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mulligan import strategies as registry
from mulligan import validate
from mulligan.actor import Budget, Tool
from mulligan.bench import demo
from mulligan.bench.executors import open_executor
from mulligan.bench.report import report_in, write_report
from mulligan.bench.stats import RunStats
from mulligan.bench.study import Study, first_attempt_source, shares_first_attempt
from mulligan.bench.transfer import (
    Transfer,
    TransferStudy,
    check_test_strategies,
    training_split,
)
from mulligan.cli import mcp as cli_mcp
from mulligan.cli.common import log_to_resume, open_memory, selected
from mulligan.cli.local import REPORTER
from mulligan.cli.style import Progress
from mulligan.config import load_config
from mulligan.errors import UserError
from mulligan.lifecycle import lifecycle, new_run_id
from mulligan.llm.base import ChatModel
from mulligan.llm.connect import connect, local_fields
from mulligan.llm.pricing import Price, require_price_for_cost_budget
from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.curator import CuratorSettings
from mulligan.run_config import LoopSection, MemorySection, RunConfig
from mulligan.sandbox import Policy
from mulligan.schema import Episode, Task
from mulligan.tasks.suites import load_suite

StudyCallback = Callable[[str, int, Task, Episode], None]

REPEATED_TEMPERATURE = 0.7


def bench_progress(total: int, prefix: str = "") -> tuple[Progress, StudyCallback]:
    """Progress per strategy (and pass): bars on a terminal, plain lines otherwise."""
    progress = Progress(total, prefix)

    def on_episode(strategy: str, run_pass: int, task: Task, episode: Episode) -> None:
        key = strategy if run_pass == 1 else f"{strategy} (pass {run_pass})"
        progress.advance(key, episode.passed, episode.usage.total_tokens, episode.usage.cost)

    return progress, on_episode


def refuse_to_overwrite(
    out: Path, run_id: str | None, any_run: bool = False, resumable: bool = False
) -> None:
    """A report replaces only files mulligan wrote as the report of `run_id` (`any_run`: of
    any run, as the demo replaces its own): never a user's files, never an earlier run's."""
    present, theirs = report_in(out)
    if not present or (theirs is not None and (any_run or theirs == run_id)):
        return
    what = f"the report of run {theirs}" if theirs else "files mulligan did not write"
    again = f", --resume {theirs} to continue that run" if theirs and resumable else ""
    raise UserError(
        f"--out {out} already holds a report's files ({', '.join(present)}: {what}); "
        f"pass another --out DIR{again}, or move them away"
    )


def _summary_lines(stats: RunStats, prefix: str = "") -> list[str]:
    lines = []
    for s in stats.strategies:
        by_trial = " → ".join(str(k) for k in s.solved_by_trial)
        oracle = s.any_by_trial[-1] if s.any_by_trial else 0
        budgets = f"trial budget 1 → {len(s.solved_by_trial)}"
        lines.append(
            f"{prefix}{s.label:<22} submitted answer passed, {budgets}: {by_trial} of {s.tasks} "
            f"(any attempt passed: {oracle})"
        )
    return lines


def run_study(
    study: Study | TransferStudy, run_id: str, resume: bool, out: Path, prefix: str = ""
) -> RunStats:
    with lifecycle(study.memory.log, run_id, study.manifest(), resume, prefix):
        print(f"{prefix}run id: {run_id}", file=sys.stderr, flush=True)
        if isinstance(study, TransferStudy):
            learning, on_learning = bench_progress(len(study.transfer.tasks), "learning phase: ")
            with learning.shown():
                study.learn(run_id, on_learning)
        progress, on_episode = bench_progress(len(study.tasks), prefix)
        with progress.shown():
            study.run(run_id, on_episode)
    stats = write_report(study.memory.log, run_id, out)
    for line in _summary_lines(stats, prefix):
        print(line)
    print(f"{prefix}report: {out / 'report.md'} and {out / 'report.html'}")
    print(f"{prefix}run id: {run_id}", file=sys.stderr, flush=True)
    return stats


def transfer_of(args: argparse.Namespace, test: list[Task]) -> Transfer | None:
    """What --learn-on asks for (None without it), refused before anything starts."""
    if not args.learn_on:
        for flag, given in (("--keep-learning", args.keep_learning),):
            if given:
                raise UserError(f"{flag} needs --learn-on TRAIN")
        return None
    for flag, given in (
        ("--passes", args.passes != 1),
        ("--first-from", args.first_from),
        ("--executor ray", args.executor != "threads"),
    ):
        if given:
            raise UserError(f"--learn-on: {flag} is not for a transfer study; drop it")
    suite = load_suite(args.suite, data=args.data, feedback=args.feedback).tasks
    train = training_split(args.learn_on, suite, test, args.seed)
    defaults = registry.TRANSFER_STUDY
    if args.keep_learning:
        defaults = (*defaults[:-1], registry.LEARNER)
    args.strategies = args.strategies or ",".join(defaults)
    check_test_strategies([s.name for s in registry.parse(args.strategies)], args.keep_learning)
    curator = CuratorSettings(
        merge_similarity=args.merge_similarity, token_budget=args.lesson_budget
    )
    return Transfer(args.learn_on, train, args.keep_learning, curator)


def cmd_bench(args: argparse.Namespace) -> int:
    config = load_config(vars(args))
    suite = selected(args)
    transfer = transfer_of(args, suite.tasks)
    args.strategies = args.strategies or ",".join(registry.DEFAULT_STUDY)
    if transfer or any(s.uses_store for s in registry.parse(args.strategies)):
        validate.embedding_available(config.run.embedding)
    with cli_mcp.suite_with_mcp(suite, config.run.mcp) as suite:
        policy = suite.hidden(config.policy())
        return _bench(args, config, suite.tasks, suite.tools, policy, transfer)


def _bench(
    args: argparse.Namespace,
    config: RunConfig,
    suite_tasks: list[Task],
    extra: list[Tool],
    policy: Policy,
    transfer: Transfer | None = None,
) -> int:
    chosen = registry.parse(args.strategies)
    strategies = [s.name for s in chosen]
    refuse_to_overwrite(Path(args.out), args.resume, resumable=True)
    repeated = config.loop.trials > 1 and any(s.repeats for s in chosen)
    model = connect(
        config.endpoint,
        default_temperature=REPEATED_TEMPERATURE if repeated else 0.0,
        reporter=REPORTER,
    )
    given = config.given("budget.max_cost")
    require_price_for_cost_budget(model.name, model.price, given, suite_tasks)
    if repeated and model.temperature == 0:
        print(
            "mulligan: warning: temperature 0 with several trials: a deterministic endpoint "
            "repeats its first attempt, so `retry` cannot differ from `react`",
            file=sys.stderr,
        )
    out = Path(args.out)
    if args.resume:
        log_to_resume(config, args.resume, default=str(out / "memory"))
    executor = open_executor(
        args.executor, args.ray_address, concurrency=config.run.concurrency,
        memory_location=config.run.memory or str(out / "memory"),
        uses_store=any(s.uses_store for s in chosen),
    )  # fmt: skip
    memory = open_memory(config, model, default=str(out / "memory"))
    if (
        transfer or any(s.uses_store for s in chosen)
    ) and executor is None:  # on Ray, the workers open it
        memory.store  # noqa: B018  a missing embedding model stops the bench before any task
    study = Study(
        tasks=suite_tasks,
        strategies=strategies,
        model_for=lambda strategy: model,
        memory=memory,
        config=config,
        extra_tools=extra,
        policy=policy,
        seed=args.seed,
        passes=args.passes,
        design=args.design,
        info={
            "suite": args.suite,
            "endpoint": config.endpoint.base_url or "https://api.openai.com/v1",
            "temperature": model.temperature,
            **({"feedback": args.feedback} if args.suite == "hotpotqa" else {}),
            **local_fields(model),  # a local server's endpoint, model file and flags
        },
        executor=executor,
        first_from=args.first_from,
    )
    try:
        studied = TransferStudy(study, transfer, model) if transfer else study
        run_study(studied, new_run_id(args.resume), bool(args.resume), out)
    finally:
        if executor:
            executor.close()
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    out = Path(args.out)
    directory = Path(args.memory) if args.memory else out / "memory"
    if not (directory / "episodes.db").exists():
        raise UserError(f"no episode log at {directory / 'episodes.db'}; pass --memory DIR")
    validate.memory_directory(str(directory))
    log = Memory(directory).log
    if log.run(args.run_id) is None:
        known = ", ".join(run["id"] for run in log.runs()[-5:]) or "none"
        raise UserError(f"no run {args.run_id!r} in {directory / 'episodes.db'} (latest: {known})")
    refuse_to_overwrite(out, args.run_id)
    stats = write_report(log, args.run_id, out)
    for line in _summary_lines(stats):
        print(line)
    print(f"report: {out / 'report.md'} and {out / 'report.html'}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    prefix = "[scripted model] "
    out = Path(args.out)
    refuse_to_overwrite(out, None, any_run=True)  # an earlier demo's report is replaced
    print(
        f"{prefix}mulligan demo: the whole study offline, against a fake endpoint whose model "
        "is a script, not a language model.",
        flush=True,
    )
    from mulligan.llm.openai_client import OpenAIChatModel

    endpoints = demo.DemoEndpoints()
    models: dict[str, OpenAIChatModel] = {}

    strategies = list(demo.EXPECTED)
    source = first_attempt_source(strategies, "paired")

    def model_for(strategy: str) -> ChatModel:
        if strategy not in models:
            branched = strategy != source and shares_first_attempt(strategy)
            models[strategy] = OpenAIChatModel(
                demo.DEMO_MODEL,
                base_url=endpoints.url_for(strategy, tried_once=branched),
                temperature=0.7,
                price=Price(0.0, 0.0),  # a script on this machine: free, and known to be
            )
        return models[strategy]

    memory = Memory(out / "memory", HashEmbedding())
    study = Study(
        tasks=demo.demo_tasks(),
        strategies=strategies,
        model_for=model_for,
        memory=memory,
        config=RunConfig(
            budget=Budget(max_steps=4),
            loop=LoopSection(trials=3),
            memory=MemorySection(show_candidates=True),  # it learns online: nothing verified
        ),
        seed=args.seed,
        info={
            "suite": "demo",
            "endpoint": "the package's fake endpoint on 127.0.0.1",
            "temperature": 0.7,
            "scripted": True,
            "label": "scripted demo model, not a language model",
        },
    )
    started = time.perf_counter()
    try:
        run_study(study, new_run_id(None), False, out, prefix)
    finally:
        endpoints.close()
    print(f"{prefix}done in {time.perf_counter() - started:.1f}s")
    return 0
