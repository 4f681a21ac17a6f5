"""`mulligan run` and `mulligan tasks`: suites and task files from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path
from typing import Any

from mulligan import display, validate
from mulligan.bench.executors import open_executor
from mulligan.bench.runner import check_resume, make_loop, manifest, run_tasks
from mulligan.cli_style import Progress, marked, table
from mulligan.config import Settings, load_settings
from mulligan.defaults import DEFAULT_MEMORY, STRATEGIES
from mulligan.errors import UserError
from mulligan.llm.base import ChatModel
from mulligan.loop import LoopSettings
from mulligan.memory import Memory, ValidityRules, make_embedder
from mulligan.schema import Episode, Role, Task, Usage
from mulligan.tasks.suites import Suite, load_suite, select


def selected(args: argparse.Namespace) -> Suite:
    suite = load_suite(args.suite, data=args.data, feedback=args.feedback)
    ids = [i.strip() for i in args.ids.split(",")] if args.ids else None
    suite.tasks = select(suite.tasks, ids=ids, limit=args.limit, sample=args.sample, seed=args.seed)
    if getattr(args, "network", False):
        suite.tasks = [task.model_copy(update={"network": True}) for task in suite.tasks]
    return suite


def cmd_tasks(args: argparse.Namespace) -> int:
    load_settings(vars(args))  # a bad mulligan.toml or MULLIGAN_* variable fails here, as in run
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


def open_memory(
    settings: Settings,
    endpoint: ChatModel | None = None,
    rules: ValidityRules | None = None,
    default: str = DEFAULT_MEMORY,
    *,
    reading: bool = False,
) -> Memory:
    """The memory the settings name: a directory, or a chroma URL with the log in `default`.
    `reading`: the store opens without an embedding (see `LessonStore.use` to add one)."""
    location = settings.memory or default
    spec = settings.embedding

    def embedder() -> Any:
        return None if reading else make_embedder(spec, endpoint)  # type: ignore[arg-type]

    validate.memory_directory(location)
    remote = location.startswith(("http://", "https://"))
    if remote:
        validate.memory_directory(default)
    directory = default if remote else location
    try:
        return Memory(directory, embedder, store=location if remote else None, rules=rules)
    except OSError as exc:  # e.g. under /proc: the checks above pass, mkdir does not
        raise UserError(
            f"--memory {directory}: cannot be created ({exc.strerror}: {exc.filename}); "
            "pass a directory on an ordinary filesystem"
        ) from exc


def log_to_resume(settings: Settings, run_id: str, default: str = DEFAULT_MEMORY) -> None:
    """`--resume` needs the log that holds the run: refused before anything is created."""
    location = settings.memory or default
    directory = default if location.startswith(("http://", "https://")) else location
    log = Path(directory).expanduser() / "episodes.db"
    if not log.exists():
        raise UserError(
            f"--resume {run_id}: no episode log at {log}; "
            "pass the --memory (bench: --out) the run used"
        )


def loop_settings(args: argparse.Namespace, strategy: str, **more: Any) -> LoopSettings:
    """The loop the flags ask for (`more`: what the command adds, such as extra tools)."""
    return LoopSettings(
        strategy=strategy,
        trials=args.trials,
        carried_reflections=args.carried_reflections,
        carry=args.carry,
        min_similarity=args.min_similarity,
        **more,
    )


def validity_rules(args: argparse.Namespace) -> ValidityRules:
    return ValidityRules(
        validate_after=args.validate_after,
        refute_after=args.refute_after,
        ttl_days=args.lesson_ttl_days,
    )


def usage_json(usage: Usage, by_role: dict[Role, Usage]) -> dict[str, Any]:
    """Tokens and cost (null when the price is unknown), and the same split by role."""
    return usage.as_json() | {"by_role": {role: u.as_json() for role, u in by_role.items()}}


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


def cmd_run(
    args: argparse.Namespace,
    settings: Settings,
    model: ChatModel,
    actor_settings: Any,
    suite: Suite,
) -> int:
    if args.strategy not in STRATEGIES:
        raise UserError(f"unknown strategy {args.strategy!r}: use one of {', '.join(STRATEGIES)}")
    run_id = args.resume or uuid.uuid4().hex[:10]
    wanted = manifest(
        command="run",
        suite=args.suite,
        model=model.name,
        endpoint=settings.base_url or "api.openai.com",
        temperature=settings.temperature,
        budget=vars(actor_settings.budget),
        strategies=[args.strategy],
        trials=args.trials,
        carried_reflections=args.carried_reflections,
        carry=args.carry,
        min_similarity=args.min_similarity,
        seed=args.seed,
        tasks=[t.id for t in suite.tasks],
    )
    if args.resume:
        log_to_resume(settings, run_id)
    executor = open_executor(
        args.executor, args.ray_address, concurrency=args.concurrency,
        memory_location=settings.memory or DEFAULT_MEMORY,
        uses_store=args.strategy == "reflexion-memory",
    )  # fmt: skip
    memory = open_memory(settings, model, validity_rules(args))
    if args.strategy == "reflexion-memory" and executor is None:  # on Ray, the workers open it
        memory.store  # noqa: B018  a missing embedding model stops the run before any task
    if args.resume:
        check_resume(memory.log.run(run_id), run_id, wanted, memory.log.path)
    else:
        memory.log.start_run(run_id, wanted)
    print(f"run id: {run_id}", file=sys.stderr)

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

    try:
        with progress.shown():
            episodes = run_tasks(
                lambda: make_loop(
                    model,
                    actor_settings,
                    loop_settings(args, args.strategy, extra_tools=suite.tools),
                    memory,
                    run_id,
                ),
                suite.tasks,
                run_id=run_id,
                strategy=args.strategy,
                memory=memory,
                concurrency=args.concurrency,
                on_episode=report,
                executor=executor,
            )
    except BaseException as exc:  # the log never keeps a run "running" that has stopped
        memory.log.end_run(
            run_id, "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        )
        raise
    finally:
        if executor:
            executor.close()
    memory.log.end_run(run_id)
    if not args.json:
        print(display.run_summary(episodes))
    print(f"run id: {run_id}", file=sys.stderr)
    failed_endpoint = endpoint_failures(episodes)
    return 1 if failed_endpoint or not all(episode.passed for episode in episodes) else 0


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
