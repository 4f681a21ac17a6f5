"""`mulligan serve`: the local model's server for other processes. Several studies, `solve`
runs or a benchmark that starts one `mulligan` process per task then share one model in
memory and one set of threads, instead of each starting its own server on the same cores.

It is the server `--model local` starts (the same guarantees: 127.0.0.1 only, ready only
after a real completion, gone when this process ends, even after SIGKILL), kept until
Ctrl-C or SIGTERM. Other processes reach it as any OpenAI-compatible endpoint."""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import sys
import time
from types import FrameType

from mulligan.cli import FAILED
from mulligan.cli.output import REPORTER
from mulligan.errors import UserError, listen_refusal
from mulligan.llm import local_model, local_server
from mulligan.llm.connect import connect_local
from mulligan.runs.build import local_server_settings
from mulligan.settings.loading import load_config

SHARED_SLOTS = 4
"""Slots when `--local-slots` is not given: a server shared by a few processes at once."""
POLL_SECONDS = 1.0


def why_not_listen(port: int) -> str | None:
    """Why this process cannot listen on `port` of 127.0.0.1 (what to do about it too), or
    None when it can."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return listen_refusal(port, exc)
    return None


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)  # leaves through the exit handlers, which stop the server


def cmd_serve(args: argparse.Namespace) -> int:
    config = load_config(vars(args))
    spec = config.endpoint.model or "local"
    if not local_model.is_local(spec):
        raise UserError(
            f"--model {spec}: `mulligan serve` runs a model on this machine; "
            "pass --model local, local:0.5b or local:PATH.gguf"
        )
    if args.port is not None and (why := why_not_listen(args.port)):
        raise UserError(why)
    packaged = local_model.packaged(spec)
    if packaged is not None and not local_model.available(packaged):
        raise UserError(local_model.missing_message(packaged))
    shape = local_server_settings(config).model_copy(
        update={"slots": config.local.slots or SHARED_SLOTS, "port": args.port or 0}
    )
    model = connect_local(config.endpoint, spec, 0.0, REPORTER, shape)
    server = local_server.server_at(model.base_url)
    assert server is not None  # connect_local has just started it
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        print(
            f"mulligan serve: {server.model.path.name} at {server.base_url} "
            f"({server.shape()}, {server.settings.context_per_slot} tokens a slot; "
            "Ctrl-C stops it)",
            flush=True,
        )
        print(
            f"export OPENAI_BASE_URL={server.base_url} MULLIGAN_MODEL={server.model.alias} "
            "OPENAI_API_KEY=none",
            flush=True,
        )
        while server.running():
            time.sleep(POLL_SECONDS)
    finally:
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, previous)
    status = server.process.poll() if server.process else None
    print(
        f"mulligan: the local server stopped on its own (exit status {status}); "
        "start `mulligan serve` again",
        file=sys.stderr,
    )
    return FAILED
