"""Compression off vs on for the same 30-step scripted task (tools return 2 KB each).

Prints total prompt tokens, peak view tokens and model calls for each setting.
Token counts are the offline estimate the scripted model reports as usage.

    python benchmarks/compression.py [--steps 30] [--threshold 4000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripted task is the tests'

from mulligan.actor import Actor, ActorSettings, BudgetSection, CompressionSection, tool
from mulligan.llm.tokens import raw_estimate
from mulligan.testing import ScriptedModel
from tests.helpers.long_task import LongTaskScript, is_summary_request


def measure(script: LongTaskScript, compression: CompressionSection) -> dict[str, object]:
    @tool
    def read_page(page: int) -> str:
        """Use to read one page of the document."""
        return script.tool_output(page)

    model = ScriptedModel(policy=script.policy)
    settings = ActorSettings(
        budget=BudgetSection(max_steps=script.steps + 10, max_tokens=10**8, max_cost=10**6),
        compression=compression,
    )
    attempt = Actor(model, settings).run(
        "long", "Read the pages one by one, then tell me the vault code.", [read_page]
    )
    views = [
        raw_estimate(c.messages, c.tools) for c in model.calls if not is_summary_request(c.messages)
    ]
    return {
        "prompt tokens": attempt.usage.prompt_tokens,
        "peak view": round(max(views)),
        "model calls": len(model.calls),
        "folds": len(attempt.compressions),
        "answer right": "4417" in (attempt.answer or ""),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threshold", type=int, default=CompressionSection().threshold_tokens)
    args = parser.parse_args()
    rows = {
        "off": CompressionSection(enabled=False),
        f"on ({args.threshold})": CompressionSection(threshold_tokens=args.threshold),
        f"on ({args.threshold}), summariser down": CompressionSection(
            threshold_tokens=args.threshold
        ),
    }
    results = {}
    for name, settings in rows.items():
        script = LongTaskScript(args.steps, fail_summaries="down" in name)
        results[name] = measure(script, settings)
    columns = list(next(iter(results.values())))
    print(f"{'setting':<32}" + "".join(f"{c:>15}" for c in columns))
    for name, row in results.items():
        print(f"{name:<32}" + "".join(f"{row[c]!s:>15}" for c in columns))
    base = results["off"]["prompt tokens"]
    for name, row in list(results.items())[1:]:
        saving = 1 - int(row["prompt tokens"]) / int(base)  # type: ignore[call-overload]
        print(f"saving, {name}: {saving:.0%} fewer prompt tokens")


if __name__ == "__main__":
    main()
