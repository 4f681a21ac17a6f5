"""`mulligan attempt`: one question, one attempt."""

from __future__ import annotations

import argparse
from pathlib import Path

from mulligan.actor import Actor, build_tools
from mulligan.cli import display
from mulligan.cli import mcp as cli_mcp
from mulligan.cli.common import cli_approver
from mulligan.cli.pipeline import connect_models
from mulligan.llm.pricing import require_price_for_cost_budget
from mulligan.runs.build import actor_settings, box_policy
from mulligan.settings.loading import load_config


def cmd_attempt(args: argparse.Namespace) -> int:
    config = load_config(vars(args))
    model, _ = connect_models(config)
    names = [n.strip() for n in (args.tools or "").split(",") if n.strip()]
    with cli_mcp.servers(config.run.mcp) as mcp:
        names += [t.name for t in mcp.tools]
        tools = build_tools(
            names,
            workspace=Path(args.workspace),
            network=args.network,
            extra=mcp.tools,
            policy=box_policy(config),  # the settings files stay out of the box
        )
        chosen = actor_settings(config)
        require_price_for_cost_budget(model.name, model.price, config.given("budget.max_cost"), [])
        actor = Actor(model, chosen, approve=cli_approver(args.yes))
        attempt = actor.run("question", args.question, tools)
    if args.json:
        print(attempt.model_dump_json(indent=2))
    else:
        print(display.trajectory(attempt))
    return 0 if attempt.answer is not None and attempt.stop_reason != "model_error" else 1
