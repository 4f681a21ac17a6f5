"""`mulligan attempt`: one question, one attempt."""

from __future__ import annotations

import argparse
from pathlib import Path

from mulligan import display
from mulligan.actor import Actor, build_tools
from mulligan.cli import mcp as cli_mcp
from mulligan.cli.common import cli_approver
from mulligan.cli.pipeline import connect_models
from mulligan.config import load_config
from mulligan.llm.pricing import require_price_for_cost_budget


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
            policy=config.policy(),  # the settings files stay out of the box
        )
        chosen = config.actor_settings()
        require_price_for_cost_budget(model.name, model.price, config.given("budget.max_cost"), [])
        actor = Actor(model, chosen, approve=cli_approver(args.yes))
        attempt = actor.run("question", args.question, tools)
    if args.json:
        print(attempt.model_dump_json(indent=2))
    else:
        print(display.trajectory(attempt))
    return 0 if attempt.answer is not None and attempt.stop_reason != "model_error" else 1
