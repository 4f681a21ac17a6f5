"""How often the same seeded request gets a different reply from the local llama.cpp server,
at 1 slot and at several: at temperature 0, or sampled (`--temperature 0.7`).

Starts the model (`--model`, default `local`: the model of the `local` extra) on llama.cpp's
server as mulligan does, once per slot count (`--slots 1,4`), and sends one request
`--requests` times (20) at `--temperature` (0) with one fixed seed: at 1 slot one after another,
at N slots N at a time, so that the server batches them. With `--mixed`, each of those is
sent beside N - 1 requests for other tasks instead, so the batch it shares varies as it does
in a study. Prints, per slot count, how many replies differ from the first, how many distinct
replies there were, where the first difference starts, and how many differ from the 1-slot
reply. `--base-url URL` measures a server that is already running (`mulligan serve`) at the
slots it has instead of starting one. Determinism, not speed: a machine shared with other
work changes how long it takes, not what it counts, though the batches that happen to form
can differ.

    pip install -e ".[local]"
    python benchmarks/determinism.py [--slots 1,4] [--requests 20] [--max-tokens 128] [--mixed]
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from mulligan.llm import local_model, local_server
from mulligan.llm.local_server import ServerSettings

TASK = (
    "Complete this Python function and reply with it in one ```python block:\n\n"
    "def running_median(numbers: list[float]) -> list[float]:\n"
    '    """The median of numbers[:i + 1] for every i, in order."""\n'
)
OTHERS = [
    "Write a Python function that returns the n-th Fibonacci number, with a docstring.",
    "Write a Python function that checks whether a string is a palindrome, ignoring case.",
    "Write a Python function that merges two sorted lists into one sorted list.",
    "Explain in three sentences what a hash table is.",
    "Write a Python class for a stack with push, pop and peek.",
]
SEED = 1234


def ask(base_url: str, model: str, prompt: str, max_tokens: int, temperature: float = 0) -> str:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "temperature": temperature,
        "seed": SEED,
        "max_tokens": max_tokens,
    }
    request = urllib.request.Request(
        f"{base_url.rstrip('/')}/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=1800) as reply:
        return str(json.loads(reply.read())["choices"][0]["message"]["content"] or "")


def replies(base_url: str, model: str, slots: int, args: argparse.Namespace) -> list[str]:
    """The task's replies: one at a time at 1 slot; else `slots` requests at once, either
    all the task or (`--mixed`) the task beside others."""
    if slots == 1:
        return [
            ask(base_url, model, TASK, args.max_tokens, args.temperature)
            for _ in range(args.requests)
        ]
    found: list[str] = []
    with ThreadPoolExecutor(slots) as pool:
        while len(found) < args.requests:
            wave = min(slots, args.requests - len(found))
            if args.mixed:
                others = [OTHERS[(len(found) + n) % len(OTHERS)] for n in range(slots - 1)]
                sent = [pool.submit(ask, base_url, model, TASK, args.max_tokens, args.temperature)]
                sent += [
                    pool.submit(ask, base_url, model, p, args.max_tokens, args.temperature)
                    for p in others
                ]
                found.append(sent[0].result())
                for other in sent[1:]:
                    other.result()
            else:
                sent = [
                    pool.submit(ask, base_url, model, TASK, args.max_tokens, args.temperature)
                    for _ in range(wave)
                ]
                found += [s.result() for s in sent]
    return found


def first_difference(texts: list[str]) -> int | None:
    """The first character at which some reply differs from the first; None if none does."""
    starts = [
        next((i for i, (a, b) in enumerate(zip(texts[0], t, strict=False)) if a != b),
             min(len(texts[0]), len(t)))
        for t in texts[1:] if t != texts[0]
    ]  # fmt: skip
    return min(starts) if starts else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="local")
    parser.add_argument("--slots", default="1,4")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--mixed", action="store_true")
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    parser.add_argument("--base-url", default=None, help="a running server instead")
    args = parser.parse_args()
    beside = ", each beside other tasks" if args.mixed else ""
    print(f"{args.requests} requests at temperature {args.temperature:g}, seed {SEED}, "
          f"{args.max_tokens} tokens{beside}; {os.cpu_count()} cores")  # fmt: skip
    print(f"{'slots':>5} {'differ from the first':>22} {'distinct':>8} "
          f"{'first difference at char':>25} {'differ from 1 slot':>19}")  # fmt: skip
    alone: list[str] | None = None
    levels = [None] if args.base_url else [int(n) for n in args.slots.split(",")]
    for level in levels:
        if args.base_url:
            served = local_server.served_facts(args.base_url) or {}
            slots, base_url = int(str(served.get("slots", 1))), args.base_url
            model = json.loads(urllib.request.urlopen(f"{base_url}/models").read())["data"][0]
            got = replies(base_url, model["id"], slots, args)
        else:
            file = local_model.resolve(args.model, local_model.LogReporter())
            settings = ServerSettings(slots=level, threads=args.threads)
            server = local_server.LocalServer(file, settings)
            server.start()
            try:
                slots = server.slots
                got = replies(server.base_url, file.alias, slots, args)
            finally:
                server.stop()
        alone = got if slots == 1 else alone
        differ = sum(text != got[0] for text in got)
        at = first_difference(got)
        versus = "-" if alone is None else str(sum(text != alone[0] for text in got))
        print(f"{slots:>5} {differ:>22} {len(Counter(got)):>8} "
              f"{'-' if at is None else at:>25} {versus:>19}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
