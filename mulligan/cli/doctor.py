"""`mulligan doctor`: is the endpoint reachable, does the memory open, can code run?"""

from __future__ import annotations

import argparse
import time

from mulligan import sandbox
from mulligan.cli.common import open_memory
from mulligan.config import endpoint_configured, load_settings
from mulligan.errors import AgentRunError, UserError
from mulligan.llm.connect import connect


def cmd_doctor(args: argparse.Namespace) -> int:
    settings = load_settings(vars(args))
    problems = 0

    def report(name: str, ok: bool, detail: str) -> None:
        nonlocal problems
        problems += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")

    if not endpoint_configured(settings):
        report("endpoint", False, "none configured (--base-url / OPENAI_BASE_URL, --api-key)")
    else:
        try:
            model = connect(settings)
            started = time.perf_counter()
            reply = model.chat(
                [{"role": "user", "content": "Reply with the word ok."}], max_tokens=8
            )
            took = time.perf_counter() - started
            report(
                "endpoint",
                True,
                f"{model.base_url} model {model.name}: {reply.text[:40]!r} in {took:.1f}s",
            )
        except (UserError, AgentRunError) as exc:
            report("endpoint", False, str(exc))
    try:
        memory = open_memory(settings)
        report("episode log", True, str(memory.log.path))
        count = memory.store.count()
        report("lesson store", True, f"{count} lessons, embedding {settings.embedding}")
    except (UserError, OSError) as exc:
        report("memory", False, str(exc))
    try:
        box = sandbox.containment()
        run = sandbox.run_python("print(6 * 7)")
        report("sandbox", run.stdout.strip() == "42", run.describe().splitlines()[0])
        off = "; off: " + ", ".join(box.missing) if box.missing else "; every protection on"
        report("containment", box.level == "namespaces", f"{box.level} ({box.detail}){off}")
    except UserError as exc:
        report("sandbox", False, str(exc))
    return 1 if problems else 0
