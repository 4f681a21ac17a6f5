"""The persistent agent's study on a synthetic suite against the package's fake endpoint
(`persistent_agent.py --smoke`): a model that answers right only with the lesson it writes in
view, so that a check of the study's plumbing knows what every figure must be."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SMOKE_LESSON = "Convert the km to metres by multiplying by 1000."

SMOKE_TASKS = "".join(
    f"- id: units-{n}\n  family: units\n  prompt: A path is {n} km long. How long is it in "
    f"metres?\n  checks: [{{type: exact_match, answer: '{n * 1000}', name: answer}}]\n"
    for n in range(1, 13)
)


def smoke_policy(body: dict[str, Any]) -> Any:
    """Right only with the lesson in view; the reviewer writes it after every failure."""
    from mulligan.testing import FakeReply

    text = json.dumps(body["messages"])
    if "You review a failed attempt" in body["messages"][0]["content"]:
        written = {"diagnosis": "Look at the unit asked for.", "lesson": SMOKE_LESSON}
        return FakeReply(content=json.dumps(written))
    km = int(text.split("A path is ")[1].split(" km")[0])
    return FakeReply(content=str(km * 1000) if SMOKE_LESSON in text else str(km))


@contextmanager
def smoke_endpoint(args: argparse.Namespace) -> Iterator[str]:
    """The synthetic suite written into OUT and the fake endpoint serving `smoke_policy`,
    named in the flags every session's `mulligan run` is given."""
    from mulligan.testing import FakeOpenAIServer

    Path(args.out).mkdir(parents=True, exist_ok=True)
    suite = Path(args.out) / "units.yaml"
    suite.write_text(SMOKE_TASKS)
    with FakeOpenAIServer(policy=smoke_policy) as server:
        args.passed = ["--base-url", server.base_url, "--embedding", "hash",
                       "--min-similarity", "0", *args.passed]  # fmt: skip
        yield str(suite)
