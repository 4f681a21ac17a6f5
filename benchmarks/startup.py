"""How long `mulligan --help` takes to start, against a bare `python -c pass`.

Each command runs in a fresh process (`--repeat` times, interleaved so both see
the same machine load); prints the median and the minimum of each, the
difference, and which heavy libraries `mulligan --help` loaded (it should load
none of chromadb, openai, onnxruntime, matplotlib).

    pip install -e . && python benchmarks/startup.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

HEAVY = ("chromadb", "openai", "onnxruntime", "matplotlib", "pydantic", "numpy")
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "mulligan --help": [sys.executable, "-m", "mulligan.cli", "--help"],
    "mulligan run --help": [sys.executable, "-m", "mulligan.cli", "run", "--help"],
}


def seconds(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def loaded_by_help() -> list[str]:
    probe = (
        "import contextlib, io, sys\nfrom mulligan import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    cli.main(['--help'])\n"
        "names = {m.split('.')[0] for m in sys.modules}\n"
        f"print(__import__('json').dumps(sorted(names & {set(HEAVY)!r})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return list(json.loads(done.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeat):
        for name, argv in COMMANDS.items():
            times[name].append(seconds(argv))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<22} {'median s':>9} {'min s':>7} {'over python':>12}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<22} {median:>9.3f} {min(values):>7.3f} {median - base:>+12.3f}")
    print(f"heavy libraries loaded by `mulligan --help`: {', '.join(loaded_by_help()) or 'none'}")


if __name__ == "__main__":
    main()
