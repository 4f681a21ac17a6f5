"""What `solve` adds per attempt, and what an MCP tool call costs.

- the copy of a project (read, write to a fresh directory) and the diff after an edit,
  for a directory you name (default: this repository, a git working tree);
- `--apply`'s fingerprint check of the project;
- the round trip of a tool call to an MCP server (tests/helpers/mcp_server.py) through the
  background event loop, and the time to start and stop that server.

  python benchmarks/solve.py [--dir PATH] [--runs 10] [--calls 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from mulligan.actor.mcp_tools import MCPServers
from mulligan.schema import Task
from mulligan.solve.copies import Project, ProjectCopies, digests

ROOT = Path(__file__).resolve().parents[1]


def summary(label: str, seconds: list[float], unit: float = 1e3, name: str = "ms") -> str:
    ordered = sorted(seconds)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return (
        f"{label:<38} median {statistics.median(seconds) * unit:8.2f} {name}   "
        f"p90 {p90 * unit:8.2f} {name}   (n={len(seconds)})"
    )


def copies(directory: Path, runs: int) -> None:
    project = Project(directory)
    snapshot = project.snapshot()
    size = sum(len(v) for v in snapshot.values() if isinstance(v, bytes))
    kind = "git working tree" if project.git else "plain directory"
    print(f"{directory} ({kind}): {len(snapshot)} files, {size / 1e6:.1f} MB copied per attempt")
    factory = ProjectCopies(project)
    task = Task(id="bench", prompt="bench")
    made, diffed = [], []
    target = next(p for p, v in sorted(snapshot.items()) if isinstance(v, bytes))
    for trial in range(1, runs + 1):
        started = time.perf_counter()
        with factory(task) as workspace:
            made.append(time.perf_counter() - started)
            with (workspace / target).open("a") as handle:
                handle.write("\n# edited\n")
            started = time.perf_counter()
            diff = factory.changes(workspace, trial)
            diffed.append(time.perf_counter() - started)
            assert f"a/{target}" in diff
    checked = []
    for _ in range(runs):
        started = time.perf_counter()
        digests(project.snapshot())
        checked.append(time.perf_counter() - started)
    print(summary("copy of the project", made))
    print(summary("diff after one edit", diffed))
    print(summary("--apply's unchanged-project check", checked))


def mcp(calls: int) -> None:
    command = f"{sys.executable} {ROOT / 'tests' / 'helpers' / 'mcp_server.py'}"
    started = time.perf_counter()
    servers = MCPServers([command])
    servers.start()
    start = time.perf_counter() - started
    try:
        add = next(t for t in servers.tools if t.name.endswith("_add"))
        add.function(a=1, b=2)  # warm up
        times = []
        for n in range(calls):
            started = time.perf_counter()
            assert add.function(a=n, b=1) == str(n + 1)
            times.append(time.perf_counter() - started)
    finally:
        started = time.perf_counter()
        servers.close()
        stop = time.perf_counter() - started
    print(summary("MCP tool call round trip", times))
    print(f"{'MCP server start (python, mcp SDK)':<38} {start:8.2f} s;  stop {stop:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=str(ROOT), help="the project to copy")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    copies(Path(args.dir), args.runs)
    mcp(args.calls)


if __name__ == "__main__":
    main()
