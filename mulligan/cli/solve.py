"""`mulligan solve`: the loop on the user's own project, each attempt in a copy of it.

The diff of the passing attempt goes to standard output (so `> fix.patch` keeps it);
progress, the summary and messages go to standard error.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from mulligan import display, prompts, strategies
from mulligan.actor import ActorSettings, Budget, build_tools
from mulligan.actor.tools import Approver
from mulligan.bench.runner import episode_id, manifest, settings_manifest
from mulligan.build import build_loop
from mulligan.cli.common import (
    actor_settings,
    cli_approver,
    loop_settings,
    open_memory,
    validity_rules,
)
from mulligan.cli.mcp import servers
from mulligan.config import Settings, load_settings
from mulligan.diffs import apply_diff
from mulligan.errors import UserError
from mulligan.lifecycle import lifecycle, new_run_id
from mulligan.llm.connect import connect
from mulligan.memory import Memory
from mulligan.schema import Attempt, CommandCheck, Episode, Task, Usage, Verdict
from mulligan.solve import ChangeRecordingEvaluator, Project, ProjectCopies
from mulligan.text_cut import last_lines

PROJECT_TOOLS = ["read_file", "write_file", "list_files", "python", "shell"]
REPEATED_TEMPERATURE = 0.7


def slug(text: str, limit: int = 48) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words)[:limit].strip("-") or "task"


def _validated(args: argparse.Namespace) -> tuple[Path, list[str]]:
    """The directory and checks, or a UserError before anything is started."""
    checks = [c for c in args.check if c.strip()]
    if not checks:
        raise UserError('solve needs at least one --check CMD (e.g. --check "pytest -q")')
    directory = Path(args.dir).expanduser()
    if not directory.is_dir():
        raise UserError(f"--dir {args.dir}: not a directory")
    strategies.get(args.strategy)  # a known name, or a UserError naming the choices
    if args.trials < 1:
        raise UserError("--trials must be at least 1")
    if not args.task.strip():
        raise UserError("solve needs a TASK: what the attempts should do")
    return directory, checks


def solve_task(
    text: str,
    project: Project,
    family: str,
    checks: list[str],
    tools: list[str],
    args: argparse.Namespace,
) -> Task:
    return Task(
        id=f"solve-{slug(text)}",
        family=family,
        prompt=prompts.render("solve", task=text, project=project.directory.name, checks=checks),
        tools=list(dict.fromkeys(PROJECT_TOOLS + tools)),
        checks=[CommandCheck(command=c, name=c, timeout=args.check_timeout) for c in checks],
        network=args.network,
    )


def cmd_solve(args: argparse.Namespace) -> int:
    settings = load_settings(vars(args))
    budget = actor_settings(args, settings, Budget())
    return _solve(args, settings, budget, cli_approver(args.yes))


def _solve(
    args: argparse.Namespace, settings: Settings, actor_settings: ActorSettings, approve: Approver
) -> int:
    directory, checks = _validated(args)
    extra = [n.strip() for n in args.tools.split(",") if n.strip()]
    strategy = strategies.get(args.strategy)
    repeated = strategy.repeats and args.trials > 1
    model = connect(settings, default_temperature=REPEATED_TEMPERATURE if repeated else 0.0)
    memory = open_memory(settings, model, validity_rules(args))
    project = Project(directory, skip=[memory.directory.resolve()])
    family = args.family or project.directory.name or "project"
    copies = ProjectCopies(project)
    run_id = new_run_id(args.resume)
    with servers(settings.mcp) as started:
        task = solve_task(
            args.task, project, family, checks, extra + [t.name for t in started.tools], args
        )
        build_tools(task.tools, workspace=project.directory, extra=started.tools)  # names known?
        loop = build_loop(
            model,
            loop_settings(args, args.strategy, extra_tools=started.tools, workspace_for=copies),
            actor_settings,
            memory,
            run_id,
            approve=approve,
            evaluator=ChangeRecordingEvaluator(copies, model, progress(memory)),
        )
        wanted = manifest(
            command="solve",
            directory=str(project.directory),
            task=args.task,
            checks=checks,
            family=family,
            model=model.name,
            endpoint=settings.base_url or "api.openai.com",
            strategies=[args.strategy],
            mcp=settings.mcp,
            **settings_manifest(actor_settings, loop.settings),
        )
        with lifecycle(memory.log, run_id, wanted, bool(args.resume)):
            print(f"run id: {run_id} · {project.directory} · family {family}", file=sys.stderr)
            episode = loop.run_episode(task, episode_id(run_id, args.strategy, task.id))
    return _report(episode, project, copies, args.apply, run_id)


def progress(memory: Memory) -> Callable[[Attempt, Verdict], None]:
    """One line per attempt as it is judged, after the lessons it was given."""

    def show(attempt: Attempt, verdict: Verdict) -> None:
        for lesson in memory.lessons(attempt.lesson_ids):
            print(f"attempt {attempt.trial} was given: {lesson.text}", file=sys.stderr)
        print(display.verdict_line(f"attempt {attempt.trial}", verdict), file=sys.stderr)

    return show


def _report(
    episode: Episode, project: Project, copies: ProjectCopies, apply: bool, run_id: str
) -> int:
    print(_summary(episode, run_id), file=sys.stderr)
    if not episode.passed:
        feedback = episode.verdicts[-1].feedback if episode.verdicts else ""
        if feedback:
            print("last checks said:\n" + _tail(feedback), file=sys.stderr)
        return 1
    attempt = episode.attempts[-1]
    if not attempt.changes:
        print("the passing attempt changed nothing: the checks pass as it is", file=sys.stderr)
        return 0
    sys.stdout.write(attempt.changes)
    sys.stdout.flush()
    if apply:
        if copies.unchanged_since(attempt.trial) is False:
            raise UserError(
                f"{project.directory} changed since attempt {attempt.trial} began; not applied "
                "(the diff is on standard output: check it, then `git apply` it)"
            )
        applied, skipped = apply_diff(attempt.changes, project.directory)
        print(f"applied to {project.directory}: {', '.join(applied) or 'nothing'}", file=sys.stderr)
        if skipped:
            print(f"not applied (binary): {', '.join(skipped)}", file=sys.stderr)
    else:
        print("not applied (pass --apply to apply it)", file=sys.stderr)
    return 0


def _summary(episode: Episode, run_id: str) -> str:
    attempts = episode.attempts
    usage = Usage.total(a.usage for a in attempts)
    last = episode.verdicts[-1] if episode.verdicts else None
    checks = f"{sum(c.passed for c in last.checks)}/{len(last.checks)} checks" if last else ""
    outcome = f"passed on attempt {attempts[-1].trial}" if episode.passed else "no attempt passed"
    return (
        f"{outcome} · {len(attempts)} attempt(s) · last: {checks} passed · "
        f"{usage.prompt_tokens}+{usage.completion_tokens} tokens · {usage.cost_text()} · "
        f"run id {run_id}"
    )


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join("  " + line for line in last_lines(text, lines, mark=True))
