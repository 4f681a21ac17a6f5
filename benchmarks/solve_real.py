"""`mulligan solve` on real projects: one-line bugs planted in small PyPI projects' own code.

Each project is fetched as its sdist when this runs (`pip download --no-deps --no-binary
:all:`, never committed) into --work; its own test suite must pass untouched and fail with
the bug planted (checked in the box, as `solve`'s preflight does, before any model call).
Every (strategy, bug) is one `mulligan solve` process; the bugs of a project run in order
with one memory per (project, strategy), so the second bug shows whether a `solve` on a
similar bug in the same project starts from the first one's lesson: every solve runs with
`--show-candidates`, so an unverified lesson is shown from the first attempt (by default
it would be tried only by assignment, from attempt 2, while it is verified).

  python benchmarks/solve_real.py --base-url http://127.0.0.1:8011/v1 [--strategies ...]
      [--bugs ID,...] [--trials 3] [--max-steps 12] [--protocol text] [--out results.jsonl]
      [--resume]                                          # continue --out's run
      [--concurrency 2] [--apply]       # solve's candidates at once; check what --apply wrote
  python benchmarks/solve_real.py --localise --trials 4 --strategies patch  # no model: is the
                                        # bug's function among those the pipeline would show?
  python benchmarks/solve_real.py --table results.jsonl ... # the table again, from --out(s)
  python benchmarks/solve_real.py --smoke                   # the plumbing: a local project,
                                                            # the scripted fake server
The checks run a virtual environment with pytest, made in --work from /usr/bin/python3 (the
box's user must be able to reach the interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from real_projects import BUGS, SOURCES, Bug, Source, check_python, fetch, plant, verified
from solve_stages import (
    applied_exactly,
    bug_function,
    edited,
    localise_only,
    localised,
    shown_in,
    stage,
    stage_table,
)

from mulligan.memory.log import EpisodeLog
from mulligan.schema import Episode
from mulligan.solve.copies import Project

TASK = "The test suite fails: find the bug in the project's code and fix it. Do not edit the tests."
STRATEGIES = ("react", "retry", "reflexion-memory")


@dataclass
class Outcome:
    bug: str
    project: str
    strategy: str
    protocol: str
    order: int  # 1: a project's first bug; 2: its second, run with the first one's memory
    passed: bool
    attempts: int
    tokens: int
    seconds: float
    given_lessons: int  # lessons attempt 1 was given (from the project's memory)
    silent_attempts: int  # attempts that made no tool call at all
    exit: int
    note: str = ""
    localised: str = ""  # hit / miss: the bug's function among those shown; '': not localised
    edited: bool = False  # some attempt's change applied to its copy
    stage: str = ""  # fixed, not localised, no edit applied, tests failed
    applied: str = ""  # --apply: "exactly" (--dir now differs by the printed diff and passes)


# ---------------------------------------------------------------- solving


SUMMARY = re.compile(r"(passed on attempt \d+|no attempt passed) · (\d+) attempt\(s\).*? · "
                     r"(\d+)\+(\d+) tokens")  # fmt: skip


def solve(bug: Bug, directory: Path, check: str, strategy: str, memory: Path,
          args: argparse.Namespace, order: int, log: Path) -> Outcome:  # fmt: skip
    """One `mulligan solve` process; its stderr goes to `log`, so a run killed midway is
    continued (`solve --resume`) from the run id the log names."""
    argv = [sys.executable, "-m", "mulligan.cli", "solve", TASK, "--check", check,
            "--dir", str(directory), "--strategy", strategy, "--trials", str(args.trials),
            "--memory", str(memory), "--embedding", args.embedding, "--family", bug.project,
            "--base-url", args.base_url, "--yes", "--max-steps", str(args.max_steps),
            "--max-seconds", str(args.max_seconds), "--timeout", str(args.timeout),
            "--max-reply-tokens", str(args.max_reply_tokens),
            "--concurrency", str(args.concurrency), "--show-candidates"]  # fmt: skip
    argv += ["--protocol", args.protocol] if args.protocol else []
    argv += ["--model", args.model] if args.model else []
    previous = log.read_bytes() if log.exists() else b""
    earlier = _run_id(previous.decode(errors="replace"))
    argv += ["--resume", earlier] if earlier else []
    argv += ["--apply"] if args.apply else []
    untouched = Project(directory).snapshot()
    function = bug_function(bug, directory)  # before --apply takes the bug away
    started = time.monotonic()
    limit = args.trials * args.max_seconds + 900
    with open(log, "a") as err_file:
        patch = open(log.with_name("fix.patch"), "w")  # noqa: SIM115 - closed below
        child = subprocess.Popen(argv, stdout=patch, stderr=err_file)
        try:
            code = child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            child.kill()
            code = child.wait()
            err_file.write(f"\nkilled after {limit:.0f}s\n")
        patch.close()
    seconds = time.monotonic() - started
    err = log.read_bytes()[len(previous) :].decode(errors="replace")  # this run's part
    found = SUMMARY.search(err)
    run = _run_id(err) or earlier
    episodes = _episodes(memory, run) if run else []
    silent = sum(1 for e in episodes for a in e.attempts if not any(s.tool_calls for s in a.steps))
    first = episodes[0].attempts[0] if episodes and episodes[0].attempts else None
    where, edit = localised(function, shown_in(err)), edited(episodes)
    return Outcome(bug.id, bug.project, strategy, first.protocol if first else "?", order,
        code == 0,
        attempts=int(found.group(2)) if found else 0,
        tokens=int(found.group(3)) + int(found.group(4)) if found else 0,
        seconds=round(seconds, 1),
        given_lessons=len(first.lesson_ids) if first else 0,
        silent_attempts=silent, exit=code,
        note="" if found else " ".join(err.strip().splitlines()[-1:])[:300],
        localised=where, edited=edit, stage=stage(code == 0, where, edit),
        applied=applied_exactly(directory, untouched, log.with_name("fix.patch"), check)
        if args.apply and code == 0 else "",
    )  # fmt: skip


def _run_id(err: str) -> str | None:
    found = re.search(r"run id: (\w+)", err)
    return found.group(1) if found else None


def _episodes(memory: Path, run_id: str) -> list[Episode]:
    log = EpisodeLog(memory / "episodes.db")
    return [e for row in log.episodes(run_id) if (e := log.episode(row["id"])) is not None]


def recorded(out: Path | None) -> list[Outcome]:
    """The results an --out file holds; a line that is not one stops the run, naming it."""
    outcomes = []
    lines = out.read_text().splitlines() if out is not None and out.exists() else []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            outcomes.append(Outcome(**json.loads(line)))
        except (ValueError, TypeError) as exc:
            refuse(f"{out}:{number}: not a solve_real result ({exc}); remove the line or "
                   "choose another --out")  # fmt: skip
    return outcomes


def refuse(message: str) -> NoReturn:
    """A bad input or a run that would mix with another: one line, exit 2, nothing written."""
    print(f"solve_real: {message}", file=sys.stderr)
    raise SystemExit(2)


SETTINGS = ("trials", "max_steps", "max_seconds", "max_reply_tokens", "protocol", "model",
            "embedding", "smoke", "concurrency")  # fmt: skip
"""What shapes a result: a resumed run must keep them (the endpoint's address may change)."""


def same_settings(runs: Path, args: argparse.Namespace) -> None:
    """Record the run's settings, or check that a resumed run keeps them."""
    mine = {name: getattr(args, name) for name in SETTINGS}
    path = runs / "settings.json"
    if not path.exists():
        runs.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(mine, indent=1) + "\n")
        return
    theirs = json.loads(path.read_text())
    for name in SETTINGS:
        if theirs.get(name) != mine[name]:
            flag = "--" + name.replace("_", "-")
            refuse(f"{flag} {mine[name]} differs from the run's {theirs.get(name)} ({path}): "
                   "resume with the same settings, or choose another --out")  # fmt: skip


def run_all(
    args: argparse.Namespace,
    sources: dict[str, Source],
    bugs: list[Bug],
    chosen: set[str] | None = None,
) -> list[Outcome]:
    """Every chosen (strategy, bug) not in --out yet, in order; what --out held comes first.
    A bug's order is its place among all its project's `bugs`, chosen or not: a queue given a
    project's second bug alone still records it as the second."""  # fmt: skip
    work = Path(args.work).resolve()
    python = str(check_python(work)) if not args.smoke else ""
    out = Path(args.out) if args.out else None
    label = out.stem if out else f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    runs = work / "runs" / label
    outcomes = recorded(out)
    if not args.resume and not (args.verify or args.localise) and (outcomes or runs.exists()):
        refuse(f"{out if outcomes else runs} holds an earlier run: pass --resume to continue "
               "it, or choose another --out")  # fmt: skip
    if not args.verify and not args.localise:
        same_settings(runs, args)
    done = {(o.strategy, o.bug) for o in outcomes}
    for name in dict.fromkeys(b.project for b in bugs if chosen is None or b.id in chosen):
        source = sources[name]
        pristine = fetch(source, work) if not args.smoke else work / "pristine" / name
        check = source.check.format(python=python)
        for strategy in args.strategies[:1] if args.verify or args.localise else args.strategies:
            memory = runs / strategy / name / "memory"
            for order, bug in enumerate((b for b in bugs if b.project == name), 1):
                if (strategy, bug.id) in done or (chosen is not None and bug.id not in chosen):
                    continue
                where = runs / strategy / bug.id / pristine.name  # named as a user's project
                planted = plant(bug, pristine, where)
                problem = verified(bug, pristine, planted, check)
                if problem:
                    raise SystemExit(problem)
                if args.verify:
                    print(f"{bug.id}: passes untouched, fails with the bug planted", flush=True)
                    continue
                if args.localise:  # what the repair pipeline would show, and is it the bug's
                    shown = localise_only(bug, planted, check, args.trials)
                    said = "; ".join(", ".join(g) for g in shown)
                    found = localised(bug_function(bug, planted), shown)
                    print(f"{bug.id}: {found} ({said})", flush=True)
                    continue
                log = where.parent / "solve.stderr"
                outcome = solve(bug, planted, check, strategy, memory, args, order, log)
                outcomes.append(outcome)
                print(_line(outcome), file=sys.stderr, flush=True)
                if out:
                    with open(out, "a") as results:
                        results.write(json.dumps(asdict(outcome)) + "\n")
    return outcomes


def _line(o: Outcome) -> str:
    verdict = "fixed" if o.passed else f"not fixed (exit {o.exit})"
    given = f", attempt 1 given {o.given_lessons} lesson(s)" if o.given_lessons else ""
    note = f" — {o.note}" if o.note else ""
    return (
        f"{o.strategy:<17} {o.bug:<26} {verdict} in {o.attempts} attempt(s), {o.tokens} tokens,"
        f" {o.seconds:.0f}s, {o.silent_attempts} without a tool call{given}{note}"
    )


def table(outcomes: list[Outcome]) -> str:
    rows = [
        "| strategy | protocol | fixed | attempts (mean) | attempts to fix (mean) | tokens | "
        "minutes | attempts without a tool call | 2nd bug: attempt 1 given a lesson | "
        "2nd bug fixed on attempt 1 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = dict.fromkeys((o.strategy, o.protocol) for o in outcomes)
    for strategy, protocol in keys:
        mine = [o for o in outcomes if (o.strategy, o.protocol) == (strategy, protocol)]
        fixed = [o for o in mine if o.passed]
        second = [o for o in mine if o.order == 2]
        attempts = sum(o.attempts for o in mine)
        given = sum(o.given_lessons > 0 for o in second)
        first = sum(o.passed and o.attempts == 1 for o in second)
        to_fix = f"{sum(o.attempts for o in fixed) / len(fixed):.1f}" if fixed else "—"
        rows.append(
            f"| {strategy} | {protocol} | {len(fixed)}/{len(mine)} | {attempts / len(mine):.1f} "
            f"| {to_fix} | {sum(o.tokens for o in mine):,} | "
            f"{sum(o.seconds for o in mine) / 60:.0f} | {sum(o.silent_attempts for o in mine)}"
            f"/{attempts} | {given}/{len(second)} | {first}/{len(second)} |"
        )
    return "\n".join(rows)


# ---------------------------------------------------------------- the plumbing check

SMOKE_LESSON = "Read ops.py first: the bug is one operator in the function the assert names."
SMOKE_OPS = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
SMOKE_TEST = "from ops import add, mul\n\nassert add(2, 3) == 5, add(2, 3)\nassert mul(2, 3) == 6\n"


def smoke(args: argparse.Namespace) -> int:
    """A local two-bug project and a scripted endpoint that fixes a bug once it has a lesson:
    react and retry fix nothing, reflexion-memory fixes the first bug on attempt 2 and the
    second on attempt 1, from the first one's lesson."""
    from mulligan.testing import FakeOpenAIServer, FakeReply

    pristine = Path(args.work).resolve() / "pristine" / "tinycalc"
    pristine.mkdir(parents=True, exist_ok=True)
    (pristine / "ops.py").write_text(SMOKE_OPS)
    (pristine / "test_tinycalc.py").write_text(SMOKE_TEST)
    sources = {"tinycalc": Source("tinycalc", "0", "python3 test_tinycalc.py")}
    bugs = [
        Bug("tinycalc", "tinycalc-add", "ops.py", "return a + b", "return a - b"),
        Bug("tinycalc", "tinycalc-mul", "ops.py", "return a * b", "return a + b"),
    ]

    def policy(body: dict[str, Any]) -> FakeReply:
        messages = body["messages"]
        opening = str(messages[0]["content"])
        if "You review a failed attempt" in opening:
            lesson = {
                "diagnosis": f"ops.py was never changed. {SMOKE_LESSON}",
                "lesson": SMOKE_LESSON,
            }
            return FakeReply(content=json.dumps(lesson | {"tags": []}))
        if not body.get("tools"):
            return FakeReply(content=json.dumps({"diagnosis": "", "lesson": ""}))
        turns = sum(m["role"] == "assistant" for m in messages)
        if turns == 0:
            call = {"name": "read_file", "arguments": {"path": "ops.py"}}
            return FakeReply(content=None, tool_calls=[call])
        if turns == 1 and any(SMOKE_LESSON in str(m.get("content")) for m in messages):
            call = {"name": "write_file", "arguments": {"path": "ops.py", "content": SMOKE_OPS}}
            return FakeReply(content=None, tool_calls=[call])
        return FakeReply(content="I read ops.py.")

    with FakeOpenAIServer(policy=policy) as server:  # it sends tool calls natively
        args.base_url, args.protocol = server.base_url, args.protocol or "native"
        chosen = set(args.bugs.split(",")) if args.bugs else None
        outcomes = run_all(args, sources, bugs, chosen)
    print(stage_table(outcomes) + "\n\n" + table(outcomes))
    memory = [o for o in outcomes if o.strategy == "reflexion-memory"]
    expected = [(True, 2, 0), (True, 1, 1)] if memory else []
    seen = [(o.passed, o.attempts, min(o.given_lessons, 1)) for o in memory]
    if seen != expected or any(o.passed for o in outcomes if o.strategy != "reflexion-memory"):
        print(f"smoke: unexpected outcomes {[asdict(o) for o in outcomes]}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8011/v1")
    parser.add_argument("--model")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--bugs", help="comma-separated bug ids (default: all)")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--max-seconds", type=float, default=1800.0, help="per attempt")
    parser.add_argument("--max-reply-tokens", type=int, default=1024)
    parser.add_argument("--timeout", type=float, default=900.0, help="per model call (queues)")
    parser.add_argument("--protocol", choices=["native", "text"], help="default: solve's own")
    parser.add_argument("--embedding", default="hash")
    parser.add_argument("--work", default="mulligan-bench/solve-real")
    parser.add_argument("--out", help="append one JSON line per (strategy, bug) here")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue --out's run: solve only what has no result there yet",
    )
    parser.add_argument(
        "--table",
        nargs="+",
        metavar="OUT",
        help="print the table of --out files (one per queue) and stop",
    )
    parser.add_argument("--smoke", action="store_true", help="the scripted fake server")
    parser.add_argument("--verify", action="store_true", help="set up and check the bugs only")
    parser.add_argument("--localise", action="store_true", help="localise the bugs only (no model)")
    parser.add_argument("--apply", action="store_true", help="solve --apply; check what it wrote")
    parser.add_argument("--concurrency", type=int, default=1, help="solve's: candidates at once")
    args = parser.parse_args(argv)
    args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    if args.table:
        outcomes = [o for out in args.table for o in recorded(Path(out))]
        print(stage_table(outcomes) + "\n\n" + table(outcomes))
        return 0
    if args.resume and not args.out:
        parser.error("--resume needs --out: the run it continues is the one recorded there")
    if args.smoke:
        return smoke(args)
    chosen = set(args.bugs.split(",")) if args.bugs else {b.id for b in BUGS}
    unknown = chosen - {b.id for b in BUGS}
    if unknown:
        parser.error(f"--bugs: unknown {', '.join(sorted(unknown))}")
    outcomes = run_all(args, SOURCES, BUGS, chosen)
    if outcomes:
        print(stage_table(outcomes) + "\n\n" + table(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
