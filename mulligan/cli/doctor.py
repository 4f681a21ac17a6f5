"""`mulligan doctor`: is the endpoint reachable, does the memory open, can code run?"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from mulligan import sandbox
from mulligan.cli.output import REPORTER
from mulligan.cli.pipeline import connect_models, open_memory
from mulligan.errors import AgentRunError, UserError
from mulligan.llm import local_model, local_server
from mulligan.llm.base import ChatModel, ChatResponse
from mulligan.llm.connect import connect_local, local_wanted
from mulligan.llm.local_server import ServerSettings
from mulligan.runs.build import local_server_settings
from mulligan.settings.loading import endpoint_configured, load_config
from mulligan.settings.run_config import EndpointSection

Report = Callable[[str, bool, str], None]


def cmd_doctor(args: argparse.Namespace) -> int:
    config = load_config(vars(args))
    settings = config.endpoint
    problems = 0

    def report(name: str, ok: bool, detail: str) -> None:
        nonlocal problems
        problems += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")

    local = local_model.is_local(settings.model)
    if not endpoint_configured(settings) and not local:
        fallback = settings.model is None and local_wanted() and local_model.available()
        why = "commands run the local model below" if fallback else "--base-url / OPENAI_BASE_URL"
        report("endpoint", fallback, f"none configured ({why}; --api-key for a hosted one)")
    else:
        try:
            model, _ = connect_models(config)
            reply, took = timed(model, "Reply with the word ok.", 8)
            said = f"{reply.text[:40]!r} in {took:.1f}s"
            report("endpoint", True, f"{model.base_url} model {model.name}: {said}")
        except (UserError, AgentRunError) as exc:
            report("endpoint", False, str(exc))
    needed = local or not endpoint_configured(settings)
    check_local_model(settings, report, needed=needed, local=local_server_settings(config))
    try:
        memory = open_memory(config)
        report("episode log", True, str(memory.log.path))
        count = memory.store.count()
        report("lesson store", True, f"{count} lessons, embedding {config.run.embedding}")
    except (UserError, OSError) as exc:
        report("memory", False, str(exc))
    try:
        box = sandbox.containment()
        run = sandbox.run_python("print(6 * 7)")
        report("sandbox", run.stdout.strip() == "42", run.describe().splitlines()[0])
        off = "; off: " + ", ".join(box.missing) if box.missing else "; every protection on"
        how = f"namespaces through {box.detail}" if box.backend else f"limits only ({box.detail})"
        report("containment", box.level == "namespaces", how + off)
    except UserError as exc:
        report("sandbox", False, str(exc))
    return 1 if problems else 0


def timed(model: ChatModel, prompt: str, max_tokens: int) -> tuple[ChatResponse, float]:
    """The model's reply to one short prompt, and the seconds it took."""
    started = time.perf_counter()
    reply = model.chat([{"role": "user", "content": prompt}], max_tokens=max_tokens)
    return reply, time.perf_counter() - started


def check_local_model(
    settings: EndpointSection, report: Report, *, needed: bool, local: ServerSettings | None = None
) -> None:
    """The local model: its file, size and checksum, the server's slots and threads, and
    tokens per second on a short prompt. Not installed is a failure only when nothing else
    answers."""
    spec = settings.model if local_model.is_local(settings.model) else "local"
    packaged = local_model.packaged(str(spec))
    if packaged is not None and not local_model.available(packaged):
        report("local model", not needed, local_model.missing_message(packaged))
        return
    try:
        model = connect_local(settings, str(spec), 0.0, REPORTER, local)
        server = local_server.server_at(model.base_url)
        assert server is not None
        reply, took = timed(model, "Count from 1 to 40, separated by spaces.", 64)
    except (UserError, AgentRunError) as exc:
        report("local model", False, str(exc))
        return
    file, tokens = server.model, reply.usage.completion_tokens
    report(
        "local model",
        tokens > 0,
        f"{file.path} ({file.size / 1e9:.2f} GB, sha256 {file.sha256[:16]}… checked), "
        f"{server.shape()}, {tokens / took:.1f} tokens/s ({tokens} tokens in {took:.1f}s), "
        f"{local_server.software()}",
    )
