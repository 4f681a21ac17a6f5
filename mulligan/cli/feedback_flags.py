"""The flags of a feedback model of its own and of selection (`[reflector]`, `loop.separate`
in mulligan/run_config.py), shared by `run`, `bench` and `solve`."""

from __future__ import annotations

import argparse


def add_feedback_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("feedback model and selection")
    group.add_argument(
        "--reflector-model",
        help="a model of its own for the reflector, self-tests, selection inputs and curator "
        "(default: the actor's); `local` or `local:PATH.gguf` runs it on this CPU",
    )
    group.add_argument("--reflector-base-url", help="its endpoint (default: --base-url's)")
    group.add_argument("--reflector-api-key", help="its API key (default: --api-key's)")
    group.add_argument(
        "--separate",
        action="store_true",
        default=None,
        help="select: two tied finalists are told apart by an input the model writes (S*)",
    )
