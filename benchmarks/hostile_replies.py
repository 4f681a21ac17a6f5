"""How long the actor takes over replies a broken or hostile model could send.

Two parts, each printed as a table (best of `--repeat`):

- floods: a megabyte of one fragment repeated (`{"`, `[[[[`, unclosed objects and arrays),
  read by the text protocol's parser (`parse_text_turn`): each is a format error fed back to
  the model; the time is the parser's.
- streamed: a text-protocol turn of N pieces (a chunk each, as the fake server sends them)
  read by the client's stream reader (`read_stream`) watching for the end of the first
  action, which never comes: thoughts that never act, or an action input that never closes.

    python benchmarks/hostile_replies.py [--megabytes 1] [--pieces 20000 80000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable
from typing import Any

from mulligan.actor.text_protocol import ActionWatch, parse_text_turn
from mulligan.llm.streaming import read_stream

FLOODS = ["[", "[[[[ ", '{"', '[{"', '{"a"\n', '{"a":', '{"a":[', '{"a":["', '{"a":1,', "{}"]


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


def chunks_of(text: str) -> list[dict[str, Any]]:
    """A streamed reply as the fake server sends it: a chunk per piece, then the finish."""
    pieces = re.findall(r"\s*\S+|\s+", text)
    chunks = [{"choices": [{"delta": {"content": piece}}]} for piece in pieces]
    return [*chunks, {"choices": [{"delta": {}, "finish_reason": "stop"}]}]


STREAMED = {
    "rambling, no action": "Thought: I weigh which action: the notes, or a guess\n",
    "one long action input": 'Action: python\nAction Input: {"code": "',
}
"""Replies streamed to their end: thoughts that never act, and an action whose JSON input
(code with a brace and a colon a line) never closes."""


def streamed(kind: str, pieces: int, repeat: int) -> float:
    start = STREAMED[kind]
    line = start if kind.startswith("rambling") else "d = {1: 2}  # and on and on\n"
    text = start + line * (pieces // len(re.findall(r"\s*\S+|\s+", line)))
    chunks = chunks_of(text)
    return best_of(repeat, lambda: read_stream(chunks, ActionWatch))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=1.0)
    parser.add_argument("--pieces", type=int, nargs="+", default=[20000, 80000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    floods(args.megabytes, args.repeat)
    print("\n| streamed reply | pieces | read s | µs per piece |\n|---|---|---|---|")
    for kind in STREAMED:
        for pieces in args.pieces:
            seconds = streamed(kind, pieces, args.repeat)
            print(f"| {kind} | {pieces:,} | {seconds:.3f} | {seconds / pieces * 1e6:.1f} |")


if __name__ == "__main__":
    main()
