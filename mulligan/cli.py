"""The command line: a thin layer over the library."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from mulligan import (
    cli_bench,
    cli_config,
    cli_data,
    cli_doctor,
    cli_mcp,
    cli_memory,
    cli_solve,
    cli_style,
    cli_tasks,
    display,
    validate,
)
from mulligan.actor import Actor, ActorSettings, Budget, CompressionSettings, build_tools
from mulligan.actor.tools import Approver
from mulligan.bench.study import DESIGNS
from mulligan.carry import CARRY_MODES
from mulligan.config import Settings, load_settings
from mulligan.errors import AgentRunError, UserError
from mulligan.llm.connect import connect
from mulligan.llm.pricing import require_price_for_cost_budget
from mulligan.loop import MIN_SIMILARITY, STRATEGIES
from mulligan.schema import ToolCall

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


def add_endpoint_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("endpoint")
    group.add_argument("--base-url", help="OpenAI-compatible endpoint (or OPENAI_BASE_URL)")
    group.add_argument("--api-key", help="API key (or OPENAI_API_KEY)")
    group.add_argument("--model", help="model name (or MULLIGAN_MODEL)")
    group.add_argument("--temperature", type=float)
    group.add_argument("--timeout", type=float, help="seconds per model call")
    group.add_argument("--protocol", choices=["native", "text"], help="tool calling style")
    group.add_argument("--price-in", type=float, help="US$ per million prompt tokens")
    group.add_argument("--price-out", type=float, help="US$ per million completion tokens")


def add_budget_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("budget (overrides a task's own)")
    group.add_argument("--max-steps", type=int)
    group.add_argument("--max-tokens", type=int)
    group.add_argument("--max-seconds", type=float)
    group.add_argument("--max-cost", type=float)
    group.add_argument("--max-format-errors", type=int)
    group.add_argument("--no-compression", action="store_true", help="send the full history")
    group.add_argument("--compress-at", type=int, help="fold old steps above this many tokens")
    group.add_argument("--keep-recent", type=int, help="steps always kept verbatim (default 3)")
    group.add_argument("--summary-cap", type=int, help="running summary's token cap (600)")
    group.add_argument("--context-window", type=int, help="the model's context, in tokens")


def similarity(text: str) -> float:
    """A cosine similarity floor: a number from -1 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not -1.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a cosine similarity from -1 to 1")
    return value


def add_run_flags(parser: argparse.ArgumentParser, memory_default: str) -> None:
    """What `run` and `bench` share: trials, memory, resume, concurrency, endpoint, budget."""
    parser.add_argument("--trials", type=int, default=3, help="attempts per task (not for react)")
    parser.add_argument("--memory", help=f"memory directory or chroma URL ({memory_default})")
    parser.add_argument("--embedding", help="minilm (default), minilm:DIR, openai or hash")
    parser.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted run")
    parser.add_argument("--concurrency", type=int, default=1, help="tasks at once")
    parser.add_argument(
        "--carried-reflections",
        type=int,
        default=3,
        help="reflections carried (reflexion; 0: none)",
    )
    parser.add_argument(
        "--carry",
        choices=CARRY_MODES,
        default="full",
        help="what reflexion gives the next attempt: full (previous answer, visible feedback, "
        "reflections; default) or lessons (reflections only)",
    )
    parser.add_argument(
        "--min-similarity",
        type=similarity,
        default=MIN_SIMILARITY,
        help="a stored lesson less similar to the task is not retrieved "
        f"({MIN_SIMILARITY}; solve: 0, as its lessons are the project's own)",
    )
    group = parser.add_argument_group("lesson validity")
    group.add_argument("--validate-after", type=int, default=2, help="helps that validate")
    group.add_argument("--refute-after", type=int, default=3, help="hurts that refute")
    group.add_argument("--lesson-ttl-days", type=float, help="new lessons expire after this")
    cli_mcp.add_mcp_flag(parser)
    add_endpoint_flags(parser)
    add_budget_flags(parser)


def add_executor_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor", choices=["threads", "ray"], default="threads", help="where episodes run"
    )
    parser.add_argument("--ray-address", help="the Ray cluster (default: a local one)")


def budget_from(args: argparse.Namespace) -> dict[str, Any]:
    return {
        name: getattr(args, name)
        for name in Budget.field_names()
        if getattr(args, name, None) is not None
    }


def actor_settings(args: argparse.Namespace, settings: Settings, base: Budget) -> ActorSettings:
    given = {
        "threshold_tokens": args.compress_at,
        "keep_recent": args.keep_recent,
        "summary_max_tokens": args.summary_cap,
        "context_window": args.context_window,
    }
    compression = CompressionSettings(
        enabled=not args.no_compression, **{k: v for k, v in given.items() if v is not None}
    )
    return ActorSettings(
        protocol=settings.protocol,
        budget=replace(base, **budget_from(args)),
        forced=tuple(budget_from(args)),
        compression=compression,
    )


def cli_approver(approve_all: bool) -> Approver:
    def approve(call: ToolCall) -> bool:
        if approve_all:
            return True
        if not sys.stdin.isatty():
            return False
        answer = input(f"allow {call.name}({call.arguments})? [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    return approve


# ---------------------------------------------------------------- commands


def cmd_attempt(args: argparse.Namespace) -> int:
    settings = load_settings(vars(args))
    model = connect(settings)
    names = [n.strip() for n in (args.tools or "").split(",") if n.strip()]
    with cli_mcp.servers(settings.mcp) as mcp:
        names += [t.name for t in mcp.tools]
        tools = build_tools(
            names, workspace=Path(args.workspace), network=args.network, extra=mcp.tools
        )
        chosen = actor_settings(args, settings, Budget())
        require_price_for_cost_budget(model.name, model.price, "max_cost" in chosen.forced, [])
        actor = Actor(model, chosen, approve=cli_approver(args.yes))
        attempt = actor.run("question", args.question, tools)
    if args.json:
        print(attempt.model_dump_json(indent=2))
    else:
        print(display.trajectory(attempt))
    return 0 if attempt.answer is not None and attempt.stop_reason != "model_error" else 1


def cmd_run(args: argparse.Namespace) -> int:
    settings = load_settings(vars(args))
    suite = cli_tasks.selected(args)  # a bad suite or file is reported before connecting
    if args.strategy == "reflexion-memory":
        validate.embedding_available(settings.embedding)
    repeated = args.strategy != "react" and args.trials > 1
    model = connect(settings, default_temperature=0.7 if repeated else 0.0)
    budget = actor_settings(args, settings, Budget())
    require_price_for_cost_budget(model.name, model.price, "max_cost" in budget.forced, suite.tasks)
    with cli_mcp.suite_with_mcp(suite, settings.mcp) as suite:
        return cli_tasks.cmd_run(args, settings, model, budget, suite)


def cmd_bench(args: argparse.Namespace) -> int:
    settings = load_settings(vars(args))
    suite = cli_tasks.selected(args)
    if "reflexion-memory" in args.strategies:
        validate.embedding_available(settings.embedding)
    with cli_mcp.suite_with_mcp(suite, settings.mcp) as suite:
        return cli_bench.cmd_bench(
            args, actor_settings(args, settings, Budget()), suite.tasks, suite.tools
        )


def cmd_solve(args: argparse.Namespace) -> int:
    settings = load_settings(vars(args))
    budget = actor_settings(args, settings, Budget())
    return cli_solve.cmd_solve(args, settings, budget, cli_approver(args.yes))


class Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (exit 2) instead of the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="mulligan", description="Reflexion-style agents: attempt, evaluate, reflect, remember."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    commands = parser.add_subparsers(dest="command", required=True)

    attempt = commands.add_parser("attempt", help="one question, one attempt")
    attempt.add_argument("question")
    attempt.add_argument("--tools", default="calculator", help="comma-separated tool names")
    attempt.add_argument("--workspace", default=".", help="directory for the file/code tools")
    attempt.add_argument("--yes", action="store_true", help="approve every tool that asks")
    attempt.add_argument(
        "--network", action="store_true", help="let the box reach the network (default: none)"
    )
    attempt.add_argument("--json", action="store_true", help="print the Attempt record")
    cli_mcp.add_mcp_flag(attempt)
    add_endpoint_flags(attempt)
    add_budget_flags(attempt)
    attempt.set_defaults(handler=cmd_attempt)

    run = commands.add_parser("run", help="run a suite or task file, with a strategy")
    cli_tasks.add_selection_flags(run)
    run.add_argument("--strategy", default="react", help=", ".join(STRATEGIES))
    run.add_argument("--json", action="store_true", help="one JSON object per task")
    add_run_flags(run, memory_default="~/.mulligan")
    add_executor_flags(run)
    run.set_defaults(handler=cmd_run)

    solve = commands.add_parser("solve", help="the loop on your own project, attempts in copies")
    cli_solve.add_flags(solve)
    add_run_flags(solve, memory_default="~/.mulligan")
    # a project's lessons are stored under its own family: no similarity floor within it
    solve.set_defaults(handler=cmd_solve, min_similarity=0.0)

    tasks = commands.add_parser("tasks", help="list and validate tasks without a model")
    cli_tasks.add_selection_flags(tasks)
    tasks.set_defaults(handler=cli_tasks.cmd_tasks)
    cli_memory.add_parsers(commands)

    bench = commands.add_parser("bench", help="strategies side by side, with a report")
    cli_tasks.add_selection_flags(bench)
    bench.add_argument("--strategies", default="react,retry,reflexion,reflexion-memory")
    bench.add_argument("--passes", type=int, default=1, help="run the suite again over the memory")
    bench.add_argument("--out", default="mulligan-bench", help="report and memory directory")
    bench.add_argument(
        "--design",
        choices=DESIGNS,
        default="paired",
        help="paired (default): trial 1 made once per task and shared by the strategies that "
        "start without lessons; independent: each strategy makes its own",
    )
    add_run_flags(bench, memory_default="OUT/memory")
    add_executor_flags(bench)
    bench.set_defaults(handler=cmd_bench)

    report = commands.add_parser("report", help="rebuild a bench report from the log")
    report.add_argument("run_id")
    report.add_argument("--out", default="mulligan-bench")
    report.add_argument("--memory", help="the directory holding episodes.db (default OUT/memory)")
    report.set_defaults(handler=cli_bench.cmd_report)

    demo = commands.add_parser("demo", help="the study offline, on a scripted model")
    demo.add_argument("--out", default="mulligan-demo")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(handler=cli_bench.cmd_demo)
    cli_doctor.add_parser(commands)
    cli_data.add_parser(commands)
    cli_config.add_parser(commands)
    cli_style.finish(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        cli_style.settle(args)
        validate.check_flags(args)
        return handler(args)
    except UserError as exc:
        print(f"mulligan: {exc}", file=sys.stderr)
        return 2
    except AgentRunError as exc:
        print(f"mulligan: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("mulligan: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """The console script: like main(), and `mulligan ... | head` ends quietly."""
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())


if __name__ == "__main__":
    entry()
