"""`mulligan solve`: the loop on the user's own project, each attempt in a copy of it.

The diff of the passing attempt goes to standard output (so `> fix.patch` keeps it);
progress, the summary and messages go to standard error.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from mulligan import prompts
from mulligan.actor import build_tools
from mulligan.actor.context import Protocol
from mulligan.cli import display
from mulligan.cli.common import cli_approver
from mulligan.cli.mcp import servers
from mulligan.cli.pipeline import RunRequest, opened
from mulligan.cli.run import endpoint_failures
from mulligan.errors import UserError
from mulligan.inputs.memory_files import log_directory
from mulligan.llm.hosts import self_hosted
from mulligan.memory import Memory
from mulligan.reflector import Reflector
from mulligan.runs.build import box_policy
from mulligan.runs.runner import episode_id
from mulligan.sandbox import Policy
from mulligan.schema import Attempt, CommandCheck, Episode, Task, Usage, Verdict
from mulligan.settings.loading import load_config
from mulligan.settings.run_config import RunConfig
from mulligan.solve.choose import choose, run_choice
from mulligan.solve.copies import JUNK_DIRS, ChangeRecordingEvaluator, Project, ProjectCopies
from mulligan.solve.diffs import apply_diff
from mulligan.solve.journal import finish_interrupted
from mulligan.solve.preflight import CheckRun, cannot_run, preflight
from mulligan.solve.repair import Outcome, RepairPipeline, RepairSettings
from mulligan.solve.trace import traced
from mulligan.text_cut import head_and_tail, last_lines

PROJECT_TOOLS = ["read_file", "write_file", "list_files", "python", "shell"]
BEFORE_CHARS = 3000
"""How much of a check's output on the untouched project attempt 1's prompt quotes."""


def slug(text: str, limit: int = 48) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words)[:limit].strip("-") or "task"


def solve_protocol(config: RunConfig, served_at: str | None = None) -> Protocol:
    """The user's choice (flag, MULLIGAN_PROTOCOL, mulligan.toml), else `text` where the model
    is served on this machine or network and `native` on a hosted endpoint. `served_at` is the
    URL the connected model answers at (the local model's own loopback server for `--model
    local`), else the configured one: one rule, `self_hosted`, for every way of serving it.

    Self-hosted servers (llama.cpp, Ollama, LM Studio, ... on a loopback or private address)
    often hand a small model's tool calls back as text, which the text protocol reads as they
    are (measured on Qwen2.5-Coder-1.5B: benchmarks/solve_real.py)."""
    if config.given("actor.protocol"):
        return config.actor.protocol
    where = served_at if served_at is not None else config.endpoint.base_url
    return "text" if self_hosted(where) else "native"


def solve_task(
    project: Project,
    family: str,
    checks: list[str],
    tools: list[str],
    args: argparse.Namespace,
    before: list[CheckRun] | None = None,
) -> Task:
    names = list(dict.fromkeys(PROJECT_TOOLS + tools))
    shown = [
        {
            "command": r.check.command,
            "passed": r.run.ok,
            "output": head_and_tail(r.output, BEFORE_CHARS),
        }
        for r in before or []
    ]
    return Task(
        id=f"solve-{slug(args.task)}",
        family=family,
        prompt=prompts.render(
            "solve",
            task=args.task,
            project=project.directory.name,
            top=top_level(project),
            checks=checks,
            tools=names,
            before=shown,
        ),
        tools=names,
        checks=[CommandCheck(command=c, name=c, timeout=args.check_timeout) for c in checks],
        network=args.network,
    )


def top_level(project: Project, limit: int = 40) -> list[str]:
    """The project's top-level entries, folders marked with a slash (where paths start)."""
    names = sorted({p.split("/")[0] + ("/" if "/" in p else "") for p in project.files()})
    return names[:limit] + ([f"... ({len(names) - limit} more)"] if len(names) > limit else [])


def plan_solve(args: argparse.Namespace) -> tuple[RunConfig, Path, list[str], RunRequest]:
    """What `solve` states: the project, the task, its checks and the one strategy (the
    protocol waits for the connection), or a UserError before anything is started."""
    # a project's lessons are stored under its own family: no similarity floor within it
    config = load_config(vars(args), defaults={"loop.min_similarity": 0.0})
    checks = [c for c in args.check if c.strip()]
    if not checks:
        raise UserError('solve needs at least one --check CMD (e.g. --check "pytest -q")')
    if not args.dir.strip():
        raise UserError("--dir is empty: name the project's directory (--dir . for this one)")
    directory = Path(args.dir).expanduser()
    if not directory.is_dir():
        raise UserError(f"--dir {args.dir}: not a directory")
    if directory.resolve() == Path(directory.resolve().anchor):
        raise UserError(
            f"--dir {args.dir}: the filesystem's root, not a project; name the project's "
            "directory (is a variable in --dir empty?)"
        )
    if not args.task.strip():
        raise UserError("solve needs a TASK: what the attempts should do")
    for check in checks:
        relative_to(check, directory)
    selection = {
        "directory": str(directory.resolve()),
        "task": args.task,
        "checks": checks,
        "family": args.family or directory.resolve().name or "project",
        "tools": args.tools,
        "check_timeout": args.check_timeout,
        "network": bool(args.network),
        "yes": bool(args.yes),
    }
    request = RunRequest("solve", [args.strategy], selection, resume=args.resume)
    return config, directory, checks, request


def cmd_solve(args: argparse.Namespace) -> int:
    config, directory, checks, request = plan_solve(args)
    memory = config.run.memory or request.memory_default
    outside_memory(directory, Path(log_directory(memory, request.memory_default)))
    finish_interrupted_apply(directory)
    extra = [n.strip() for n in args.tools.split(",") if n.strip()]
    family = request.selection["family"]
    with opened(config, request, box_policy(config), keep=[directory]) as run:
        protocol = solve_protocol(run.config, run.model.base_url)
        run.config = run.config.updated("actor.protocol", protocol, "solve's choice here")
        project = Project(directory, skip=[run.memory.directory.resolve()])
        copies = ProjectCopies(project)
        with servers(run.config.run.mcp) as started:
            names = extra + [t.name for t in started.tools]
            task = solve_task(project, family, checks, names, args)
            build_tools(task.tools, workspace=project.directory, extra=started.tools)  # known?
            before = checks_before(copies, task, run.policy)
            if before is None:
                return 0
            task = solve_task(project, family, checks, task.tools, args, before)
            choice = choose(args.strategy, before, project, run.config.loop.trials)
            if choice.diagnosis is not None:
                traced(choice.diagnosis, copies, task, run.policy)
            evaluator = ChangeRecordingEvaluator(copies, run.model, progress(run.memory))
            make_loop = run.make_loop(
                choice.strategy.name,
                extra_tools=started.tools,
                workspace_for=copies,
                approve=cli_approver(args.yes),
                evaluator=evaluator,
                actor={"nudge_no_tools": True},
            )
            pipeline = lambda: RepairPipeline(  # noqa: E731
                run.model,
                copies,
                evaluator,
                run.policy,
                RepairSettings.of(run.config),
                run.memory,
                Reflector(run.reflector),
                run.run_id,
                choice.strategy,
            )
            with run.running():
                print(choice.line, file=sys.stderr)
                print(
                    f"run id: {run.run_id} · {project.directory} · family {family} · "
                    f"protocol {protocol}",
                    file=sys.stderr,
                )
                found = episode_id(run.run_id, args.strategy, task.id)
                outcome = run_choice(choice, task, args.task, found, make_loop, pipeline)
    return _report(outcome, copies, args.apply, run.run_id)


def relative_to(check: str, directory: Path) -> None:
    """The check does not name the project by its own path: it runs at the root of a copy,
    where that path is the untouched project, or out of the box's reach. A virtual
    environment in it is not copied: its programs may be named by their path."""
    for path in dict.fromkeys([str(directory.absolute()), str(directory.resolve())]):
        named = re.finditer(re.escape(path) + r"(?:/([^/\s'\";&|)]*))?(?![^/\s'\";&|)])", check)
        if any(found.group(1) not in JUNK_DIRS for found in named):  # a venv is not copied
            raise UserError(
                f'--check "{check}" names the project by its path, {path}: every check runs '
                "at the root of a copy of it, so name what it runs relative to that root "
                '(e.g. "python3 tests/run.py", not "python3 /path/to/project/tests/run.py")'
            )


def outside_memory(directory: Path, memory: Path) -> None:
    """DIR is not the memory's directory or inside it (the copies leave the memory out)."""
    where = memory.expanduser().resolve()
    if directory.resolve().is_relative_to(where):
        raise UserError(
            f"--dir {directory} is inside --memory {where}, which solve never copies; "
            "keep the memory elsewhere (it may be inside the project)"
        )


def finish_interrupted_apply(directory: Path) -> None:
    """An --apply that a killed solve left in the directory is finished (it was committed)
    or undone (it was not) before anything else reads the project."""
    done = finish_interrupted(directory.resolve())
    if done is not None:
        what, paths = done
        print(
            f"an --apply to {directory} was interrupted; {what} it: {', '.join(paths)}"
            + (" (none of it had been written)" if what == "undid" else ""),
            file=sys.stderr,
        )


def checks_before(copies: ProjectCopies, task: Task, policy: Policy) -> list[CheckRun] | None:
    """Every check once on the untouched project, before any model call: one that cannot run
    at all stops `solve` (exit 2); None when all pass already (nothing to fix)."""
    before = preflight(copies, task, policy)
    for done in before:
        problem = cannot_run(done, copies.project.directory)
        if problem:
            raise UserError(f'--check "{done.check.command}" cannot run in the box: {problem}')
    failing = [r.check.command for r in before if not r.run.ok]
    if not failing:
        where = copies.project.directory
        print(f"every check already passes in {where} as it is: nothing to fix", file=sys.stderr)
        return None
    print(f"before any change: {len(failing)} of {len(before)} check(s) fail", file=sys.stderr)
    return before


def progress(memory: Memory) -> Callable[[Attempt, Verdict], None]:
    """One line per attempt as it is judged, after the lessons it was given."""

    def show(attempt: Attempt, verdict: Verdict) -> None:
        for lesson in memory.lessons(attempt.lesson_ids):
            print(f"attempt {attempt.trial} was given: {lesson.text}", file=sys.stderr)
        print(display.verdict_line(f"attempt {attempt.trial}", verdict), file=sys.stderr)

    return show


def _report(outcome: Outcome, copies: ProjectCopies, apply: bool, run_id: str) -> int:
    episode, attempt, project = outcome.episode, outcome.chosen, copies.project
    print(_summary(episode, attempt, run_id), file=sys.stderr)
    if attempt is None:
        endpoint_failures([episode])  # the endpoint's reason, where it refused the requests
        feedback = episode.verdicts[-1].feedback if episode.verdicts else ""
        if feedback:
            tail = "\n".join("  " + line for line in last_lines(feedback, 30, mark=True))
            print("last checks said:\n" + tail, file=sys.stderr)
        return 1
    if not attempt.changes:
        print("the passing attempt changed nothing: the checks pass as it is", file=sys.stderr)
        return 0
    if not _printed(attempt.changes):
        print(
            "standard output was closed before the diff was written: it is in the episode "
            f"log (mulligan episodes show, run {run_id})",
            file=sys.stderr,
        )
    if apply:
        changed = copies.changed_since(attempt.trial)
        if changed:
            named = ", ".join(changed[:5]) + (
                f" and {len(changed) - 5} more" if changed[5:] else ""
            )
            raise UserError(
                f"{project.directory} changed since attempt {attempt.trial} began; not applied "
                f"({named} changed; the diff is on standard output: check it, then `git apply` it)"
            )
        applied = apply_diff(attempt.changes, project.directory)
        print(f"applied to {project.directory}: {', '.join(applied) or 'nothing'}", file=sys.stderr)
    else:
        print("not applied (pass --apply to apply it)", file=sys.stderr)
    return 0


def _printed(diff: str) -> bool:
    """The diff on standard output; False when its reader has gone (`| head`, a pager quit
    early), whose later writes then go nowhere rather than raise when solve ends. SIGPIPE,
    which the console script lets end the process, is held off meanwhile: --apply follows."""
    previous = None  # ignored, a write to a pipe whose reader has gone raises BrokenPipeError
    with contextlib.suppress(AttributeError, ValueError):  # no SIGPIPE, or not the main thread
        previous = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        sys.stdout.write(diff)
        sys.stdout.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            nowhere = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(nowhere, sys.stdout.fileno())
            finally:
                os.close(nowhere)
        return False
    finally:
        if previous is not None:
            signal.signal(signal.SIGPIPE, previous)
    return True


def _summary(episode: Episode, chosen: Attempt | None, run_id: str) -> str:
    attempts = episode.attempts
    usage = Usage.total(a.usage for a in attempts)
    last = episode.verdicts[-1] if episode.verdicts else None
    checks = f"{sum(c.passed for c in last.checks)}/{len(last.checks)} checks" if last else ""
    outcome = f"passed on attempt {chosen.trial}" if chosen else "no attempt passed"
    return (
        f"{outcome} · {len(attempts)} attempt(s) · last: {checks} passed · "
        f"{usage.prompt_tokens}+{usage.completion_tokens} tokens · {usage.cost_text()} · "
        f"run id {run_id}"
    )
