"""How long the actor takes over replies a broken or hostile model could send.

Two parts, each printed as a table (best of `--repeat`):

- floods: a megabyte of one fragment repeated (`{"`, `[[[[`, unclosed objects and arrays),
  read by the text protocol's parser (`parse_text_turn`): each is a format error fed back to
  the model; the time is the parser's.
- streamed: a text-protocol turn of N pieces (one chunk each, no action in it) streamed by
  the fake OpenAI-compatible server on 127.0.0.1 through the real client, read to its end
  while watching for the first action; the time is the whole step, server included.

    python benchmarks/hostile_replies.py [--megabytes 1] [--pieces 5000 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from mulligan.actor import Actor, ActorSettings, BudgetSection, tool
from mulligan.actor.text_protocol import parse_text_turn
from mulligan.llm.fake_server import FakeOpenAIServer, FakeReply
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.llm.pricing import Price

FLOODS = ["[", "[[[[ ", '{"', '[{"', '{"a"\n', '{"a":', '{"a":[', '{"a":["', '{"a":1,', "{}"]


@tool
def add(a: int, b: int) -> str:
    """Use to add two integers."""
    return str(a + b)


def best_of(repeat: int, work: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def floods(megabytes: float, repeat: int) -> None:
    print(f"| fragment (x {megabytes:g} MB) | parse_text_turn s |\n|---|---|")
    for fragment in FLOODS:
        text = fragment * int(megabytes * 1_000_000 // len(fragment))
        seconds = best_of(repeat, lambda: parse_text_turn(text, ["add"]))  # noqa: B023
        print(f"| `{fragment!r}` | {seconds:.3f} |")


def streamed(pieces: int, repeat: int) -> float:
    rambling = "Thought: I will think about it at length, line after line\n"
    words = (rambling * (pieces // 10 + 1)).split(" ")[:pieces]
    content = " ".join(words)

    budget = BudgetSection(max_reply_tokens=10**7, max_tokens=10**9, max_format_errors=1)
    with FakeOpenAIServer(policy=lambda body: FakeReply(content=content)) as server:
        model = OpenAIChatModel("fake", base_url=server.base_url, price=Price(0, 0))
        actor = Actor(model, ActorSettings(protocol="text", budget=budget))
        return best_of(repeat, lambda: actor.run("t", "What is 2 + 3?", [add]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=1.0)
    parser.add_argument("--pieces", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    floods(args.megabytes, args.repeat)
    print("\n| streamed pieces | step s | µs per piece |\n|---|---|---|")
    for pieces in args.pieces:
        seconds = streamed(pieces, args.repeat)
        print(f"| {pieces:,} | {seconds:.3f} | {seconds / pieces * 1e6:.0f} |")


if __name__ == "__main__":
    main()
