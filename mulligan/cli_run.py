"""The commands that run the loop: attempt, run, bench and solve."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from mulligan import cli_bench, cli_mcp, cli_solve, cli_tasks, display, strategies, validate
from mulligan.actor import Actor, ActorSettings, Budget, CompressionSettings, build_tools
from mulligan.actor.tools import Approver
from mulligan.config import Settings, load_settings
from mulligan.llm.connect import connect
from mulligan.llm.pricing import require_price_for_cost_budget
from mulligan.schema import ToolCall


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
    strategy = strategies.get(args.strategy)
    if strategy.uses_store:
        validate.embedding_available(settings.embedding)
    repeated = strategy.repeats and args.trials > 1
    model = connect(settings, default_temperature=0.7 if repeated else 0.0)
    budget = actor_settings(args, settings, Budget())
    require_price_for_cost_budget(model.name, model.price, "max_cost" in budget.forced, suite.tasks)
    with cli_mcp.suite_with_mcp(suite, settings.mcp) as suite:
        return cli_tasks.cmd_run(args, settings, model, budget, suite)


def cmd_bench(args: argparse.Namespace) -> int:
    settings = load_settings(vars(args))
    suite = cli_tasks.selected(args)
    if any(s.uses_store for s in strategies.parse(args.strategies)):
        validate.embedding_available(settings.embedding)
    with cli_mcp.suite_with_mcp(suite, settings.mcp) as suite:
        return cli_bench.cmd_bench(
            args, actor_settings(args, settings, Budget()), suite.tasks, suite.tools
        )


def cmd_solve(args: argparse.Namespace) -> int:
    settings = load_settings(vars(args))
    budget = actor_settings(args, settings, Budget())
    return cli_solve.cmd_solve(args, settings, budget, cli_approver(args.yes))
