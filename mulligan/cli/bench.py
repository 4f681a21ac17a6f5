"""`mulligan bench`, `mulligan report` and `mulligan demo`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from mulligan import strategies as registry
from mulligan.cli import mcp as cli_mcp
from mulligan.cli.common import feedback_of, selected, selection_of
from mulligan.cli.pipeline import RunRequest, open_memory, opened, running
from mulligan.cli.progress import Progress
from mulligan.errors import UserError
from mulligan.memory.curator import CuratorSettings
from mulligan.memory.reading import MemoryReader
from mulligan.report.repeats import repeat_summaries
from mulligan.report.report import report_in, write_report
from mulligan.report.stats import RunStats
from mulligan.runs.build import box_policy
from mulligan.runs.lifecycle import new_run_id, task_digests
from mulligan.schema import Episode, Task
from mulligan.settings.loading import load_config
from mulligan.settings.run_config import RunConfig
from mulligan.studies import demo
from mulligan.studies.study import OnEpisode, Study, check_episode_ids, check_repeats, study_fields
from mulligan.studies.transfer import Transfer, TransferStudy, check_test_strategies, training_split
from mulligan.tasks.suites import Suite, load_suite


def bench_progress(total: int, prefix: str = "") -> tuple[Progress, OnEpisode]:
    """Progress per strategy (and pass, or repeat): bars on a terminal, plain lines otherwise."""
    progress = Progress(total, prefix)

    def on_episode(label: str, task: Task, episode: Episode) -> None:
        progress.advance(label, episode.passed, episode.usage.total_tokens, episode.usage.cost)

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


def _summary_lines(stats: RunStats, out: Path, prefix: str = "") -> list[str]:
    """Each strategy's solved tasks by trial budget (and by repeat), then where the report is."""
    lines = []
    for s in stats.strategies:
        by_trial = " → ".join(str(k) for k in s.solved_by_trial)
        oracle = s.any_by_trial[-1] if s.any_by_trial else 0
        budgets = f"trial budget 1 → {len(s.solved_by_trial)}"
        lines.append(
            f"{prefix}{s.label:<22} submitted answer passed, {budgets}: {by_trial} of {s.tasks} "
            f"(any attempt passed: {oracle})"
        )
    k = stats.repeats
    for r in repeat_summaries(stats):
        solved = ", ".join(str(n) for n in r.solved)
        counts = (
            f"{solved} of the {r.tasks} tasks every repeat finished; "
            f"pass^{k} {r.pass_hat[-1]:.0%} (solved every time), "
            f"pass@{k} {r.pass_at[-1]:.0%} (solved at all)"
            if r.tasks
            else "no task finished in every repeat yet"
        )
        lines.append(f"{prefix}{r.label:<22} in each of {k} repeats: {counts}")
    return [*lines, f"{prefix}report: {out / 'report.md'} and {out / 'report.html'}"]


def run_study(
    study: Study | TransferStudy, run_id: str, resume: bool, out: Path, prefix: str = ""
) -> RunStats:
    with running(study.memory.log, run_id, study.manifest(), resume, prefix):
        print(f"{prefix}run id: {run_id}", file=sys.stderr, flush=True)
        if isinstance(study, TransferStudy):
            learning, on_learning = bench_progress(len(study.transfer.tasks), "learning phase: ")
            with learning.shown():
                study.learn(run_id, on_learning)
        progress, on_episode = bench_progress(len(study.tasks), prefix)
        with progress.shown():
            study.run(run_id, on_episode)
    stats = write_report(study.memory.log, run_id, out)
    print("\n".join(_summary_lines(stats, out, prefix)))
    print(f"{prefix}run id: {run_id}", file=sys.stderr, flush=True)
    return stats


def transfer_of(args: argparse.Namespace, test: list[Task]) -> Transfer | None:
    """What --learn-on asks for (None without it), refused before anything starts."""
    if not args.learn_on:
        for flag, given in (
            ("--keep-learning", args.keep_learning),
            ("--lesson-budget", args.lesson_budget is not None),
            ("--merge-similarity", args.merge_similarity is not None),
        ):
            if given:
                raise UserError(f"{flag} needs --learn-on TRAIN")
        return None
    for flag, given in (
        ("--passes", args.passes != 1),
        ("--repeats", args.repeats != 1),
        ("--first-from", args.first_from),
        ("--executor ray", args.executor != "threads"),
    ):
        if given:
            raise UserError(f"--learn-on: {flag} is not for a transfer study; drop it")
    suite = load_suite(args.suite, data=args.data, feedback=feedback_of(args)).tasks
    train = training_split(args.learn_on, suite, test, args.seed)
    defaults = registry.TRANSFER_STUDY
    if args.keep_learning:
        defaults = (*defaults[:-1], registry.LEARNER)
    args.strategies = args.strategies or ",".join(defaults)
    check_test_strategies([s.name for s in registry.parse(args.strategies)], args.keep_learning)
    given = {"merge_similarity": args.merge_similarity, "token_budget": args.lesson_budget}
    curator = CuratorSettings(**{k: v for k, v in given.items() if v is not None})
    return Transfer(args.learn_on, train, args.keep_learning, curator)


def cmd_bench(args: argparse.Namespace) -> int:
    config, suite, transfer, request = plan_bench(args)
    refuse_to_overwrite(Path(args.out), args.resume, resumable=True)
    with (
        cli_mcp.suite_with_mcp(suite, config.run.mcp) as suite,
        opened(config, request, suite.hidden(box_policy(config))) as run,
    ):
        redrawn = [s.name for s in request.may_run() if s.repeats and s.ladder is None]
        if request.repeats(run.config) and redrawn and run.model.temperature == 0:
            print(
                "mulligan: warning: temperature 0 with several trials: a deterministic "
                f"endpoint repeats its first attempt, so `{redrawn[0]}` cannot differ from "
                "`react`",
                file=sys.stderr,
            )
        if args.repeats > 1 and run.model.temperature == 0:
            print(
                "mulligan: warning: temperature 0 with --repeats: a deterministic endpoint "
                "makes the same attempts in every repeat, so they measure only its own noise",
                file=sys.stderr,
            )
        study = Study(
            tasks=suite.tasks,
            strategies=request.strategies,
            model_for=lambda strategy: run.model,
            memory=run.memory,
            config=run.config,
            extra_tools=suite.tools,
            policy=run.policy,
            seed=args.seed,
            passes=args.passes,
            repeats=args.repeats,
            design=args.design,
            info={**request.selection, **run.connected},
            executor=run.executor,
            first_from=args.first_from,
            reflector=run.reflector,
            escalation=run.escalation,
        )
        studied = TransferStudy(study, transfer, run.reflector) if transfer else study
        run_study(studied, run.run_id, bool(args.resume), Path(args.out))
    return 0


def plan_bench(args: argparse.Namespace) -> tuple[RunConfig, Suite, Transfer | None, RunRequest]:
    """What `bench` states: its tasks, strategies, study design, a transfer study's learning
    phase, and where the memory is by default."""
    config = load_config(vars(args))
    suite = selected(args)
    transfer = transfer_of(args, suite.tasks)
    args.strategies = args.strategies or ",".join(registry.DEFAULT_STUDY)
    names = [s.name for s in registry.parse(args.strategies)]
    check_repeats(names, args.repeats, args.passes)
    tasks = suite.tasks + (transfer.tasks if transfer else [])
    check_episode_ids(tasks, args.passes, args.repeats)
    study = study_fields(
        names, suite.tasks, args.seed, args.passes, args.design, args.first_from, args.repeats
    )
    request = RunRequest(
        command="bench",
        strategies=names,
        selection={
            **selection_of(args),
            **study,
            **(transfer.manifest() if transfer else {}),
            "task_digests": task_digests(tasks),
        },
        tasks=tasks,
        resume=args.resume,
        memory_default=str(Path(args.out) / "memory"),
        executor=args.executor,
        ray_address=args.ray_address,
        learns=transfer is not None,
    )
    return config, suite, transfer, request


def cmd_report(args: argparse.Namespace) -> int:
    out = Path(args.out)
    directory = Path(args.memory) if args.memory else out / "memory"
    if not (directory / "episodes.db").exists():
        raise UserError(f"no episode log at {directory / 'episodes.db'}; pass --memory DIR")
    log = MemoryReader(directory).log  # a report only reads: the log is left as it is
    if log.run(args.run_id) is None:
        known = ", ".join(run["id"] for run in log.runs()[-5:]) or "none"
        raise UserError(f"no run {args.run_id!r} in {directory / 'episodes.db'} (latest: {known})")
    refuse_to_overwrite(out, args.run_id)
    print("\n".join(_summary_lines(write_report(log, args.run_id, out), out)))
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
    endpoints = demo.DemoEndpoints()
    offline = RunConfig.model_validate({"run": {"embedding": demo.DEMO_EMBEDDING}})
    memory = open_memory(offline, default=str(out / "memory"))
    study = demo.demo_study(endpoints, memory, args.seed)
    started = time.perf_counter()
    try:
        run_study(study, new_run_id(None), False, out, prefix)
    finally:
        endpoints.close()
    print(f"{prefix}done in {time.perf_counter() - started:.1f}s")
    return 0
