"""How much prompt a llama-cpp-python server reused, read from its log (it logs by default).

On one CPU core reading the prompt is most of a call's time (about 30 tokens a second for
the 1.5B model here), so what the server reuses from an earlier call decides the speed.
Without `--cache` it keeps one prompt: a reflection call between two actor calls throws the
actor's prompt away. With `--cache true` it keeps several states and restores the one
sharing the longest prefix. Prints, per log: calls, prompt tokens reused and read, the
reused share, and the seconds spent reading prompts (in all and per call).

    python benchmarks/prompt_reuse.py server.log [cached.log ...]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

CALL = re.compile(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
READ = re.compile(r"prompt eval time =\s+([\d.]+) ms /\s+(\d+) tokens")


def figures(log: Path) -> dict[str, float]:
    text = log.read_text(errors="replace")
    calls = [(int(a), int(b)) for a, b in CALL.findall(text)]
    reads = [float(ms) for ms, tokens in READ.findall(text) if int(tokens) > 1]
    reused, read = sum(a for a, _ in calls), sum(b for _, b in calls)
    return {
        "calls": len(calls),
        "reused": reused,
        "read": read,
        "share": reused / (reused + read) if calls else 0.0,
        "seconds": sum(reads) / 1000,
        "per_call": sum(reads) / 1000 / len(calls) if calls else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path)
    args = parser.parse_args()
    print("| log | calls | prompt tokens reused | read | reused share | reading, s | s/call |")
    print("|---|---|---|---|---|---|---|")
    for log in args.logs:
        f = figures(log)
        print(
            f"| {log.name} | {f['calls']:.0f} | {f['reused']:,.0f} | {f['read']:,.0f} | "
            f"{f['share']:.0%} | {f['seconds']:,.0f} | {f['per_call']:.1f} |"
        )


if __name__ == "__main__":
    main()
