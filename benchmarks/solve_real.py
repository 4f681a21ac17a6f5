"""`mulligan solve` on real projects: one-line bugs planted in small PyPI projects' own code.

Each project is fetched as its sdist when this runs (`pip download --no-deps --no-binary
:all:`, never committed) into --work; its own test suite must pass untouched and fail with
the bug planted (checked in the box, as `solve`'s preflight does, before any model call).
Every (strategy, bug) is one `mulligan solve` process; the bugs of a project run in order
with one memory per (project, strategy), so the second bug shows whether a `solve` on a
similar bug in the same project starts from the first one's lesson.

  python benchmarks/solve_real.py --base-url http://127.0.0.1:8011/v1 [--strategies ...]
      [--bugs ID,...] [--trials 3] [--max-steps 12] [--protocol text] [--out results.jsonl]
  python benchmarks/solve_real.py --table results.jsonl     # the table again, from --out
  python benchmarks/solve_real.py --smoke                   # the plumbing: a local project,
                                                            # the scripted fake server
The checks run a virtual environment with pytest, made in --work from /usr/bin/python3 (the
box's user must be able to reach the interpreter; see issue 25 item 1).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mulligan.memory.log import EpisodeLog
from mulligan.sandbox import Policy
from mulligan.schema import CommandCheck, Episode, Task
from mulligan.solve import Project, ProjectCopies, cannot_run, preflight

TASK = "The test suite fails: find the bug in the project's code and fix it. Do not edit the tests."
STRATEGIES = ("react", "retry", "reflexion-memory")
PYTEST = "{python} -m pytest -q -x -p no:cacheprovider"


@dataclass(frozen=True)
class Source:
    name: str
    version: str
    check: str  # run in the project's root; {python}: the interpreter that has pytest


@dataclass(frozen=True)
class Bug:
    project: str
    id: str
    path: str
    find: str
    replace: str  # `find` occurs once in `path`; the two differ in one line


SOURCES = {
    s.name: s
    for s in [
        Source("inflection", "0.5.1", f"{PYTEST} test_inflection.py"),
        Source("isodate", "0.7.2", f"PYTHONPATH=src {PYTEST} tests"),
        Source(
            "humanize",
            "4.11.0",
            f"PYTHONPATH=src {PYTEST} -o addopts= -o filterwarnings= tests/test_number.py "
            "tests/test_filesize.py tests/test_lists.py",
        ),  # fmt: skip
        Source("toolz", "1.0.0", f"{PYTEST} toolz/tests"),
        Source("semver", "3.0.2", f"PYTHONPATH=src {PYTEST} -o addopts= tests"),
    ]
}
INFLECTION, ISODATE = "inflection/__init__.py", "src/isodate/isotzinfo.py"
BUGS = [
    Bug("inflection", "inflection-dasherize", INFLECTION,
        "return word.replace('_', '-')", "return word.replace('_', ' ')"),
    Bug("inflection", "inflection-ordinal", INFLECTION,
        "number = abs(int(number))", "number = int(number)"),
    Bug("isodate", "isodate-tzsign", ISODATE,
        'tzsign = ((tzsign == "-") and -1) or 1', 'tzsign = ((tzsign == "+") and -1) or 1'),
    Bug("isodate", "isodate-isoformat-sign", ISODATE,
        'sign = ((seconds < 0) and "-") or "+"', 'sign = ((seconds > 0) and "-") or "+"'),
    Bug("humanize", "humanize-list-and", "src/humanize/lists.py",
        'return f"{str(items[0])} and {str(items[1])}"',
        'return f"{str(items[0])}, {str(items[1])}"'),
    Bug("humanize", "humanize-filesize-base", "src/humanize/filesize.py",
        "if abs_bytes < base:", "if abs_bytes <= base:"),
    Bug("toolz", "toolz-countby", "toolz/recipes.py",
        "return frequencies(map(key, seq))", "return frequencies(seq)"),
    Bug("toolz", "toolz-partitionby", "toolz/recipes.py",
        "map(tuple, pluck(1, itertools", "map(tuple, pluck(0, itertools"),
    Bug("semver", "semver-bump-minor", "src/semver/version.py",
        "return cls(self._major, self._minor + 1)",
        "return cls(self._major, self._minor + 1, self._patch)"),
    Bug("semver", "semver-prerelease-length", "src/semver/version.py",
        "return _cmp(len(a), len(b))", "return _cmp(len(b), len(a))"),
]  # fmt: skip


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


# ---------------------------------------------------------------- setting up


def check_python(work: Path) -> Path:
    """A virtual environment with pytest, from an interpreter the box's user can reach."""
    env = work / "checkenv"
    python = env / "bin" / "python"
    if python.exists() and subprocess.run([python, "-c", "import pytest"]).returncode == 0:
        return python
    base = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    subprocess.run([base, "-m", "venv", "--clear", str(env)], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "pytest"], check=True)
    return python


def fetch(source: Source, work: Path) -> Path:
    """The project's sdist, unpacked once into work/pristine."""
    tree = work / "pristine" / f"{source.name}-{source.version}"
    if tree.is_dir():
        return tree
    sdists = work / "sdists"
    spec = f"{source.name}=={source.version}"
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
    subprocess.run([*pip, spec, "-d", str(sdists)], check=True)
    archive = next(sdists.glob(f"{source.name}-{source.version}.tar.gz"))
    with tarfile.open(archive) as tar:
        if sys.version_info >= (3, 12):
            tar.extractall(tree.parent, filter="data")
        else:
            members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
            if any(m.name.startswith("/") or ".." in Path(m.name).parts for m in members):
                raise SystemExit(f"{archive}: unsafe member paths")
            tar.extractall(tree.parent, members=members)
    return tree


def plant(bug: Bug, pristine: Path, target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(pristine, target)
    path = target / bug.path
    text = path.read_text()
    if text.count(bug.find) != 1:
        raise SystemExit(f"{bug.id}: {bug.find!r} occurs {text.count(bug.find)} times in {path}")
    planted = text.replace(bug.find, bug.replace)
    changed = [
        line
        for line in difflib.unified_diff(text.splitlines(), planted.splitlines(), n=0)
        if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))
    ]
    if len(changed) != 2:
        raise SystemExit(f"{bug.id}: not a one-line change ({changed})")
    path.write_text(planted)
    return target


def checks_as_run(directory: Path, check: str) -> tuple[bool, str | None]:
    """Whether the check passes in the box, and why it cannot run (as `solve`'s preflight)."""
    task = Task(id="verify", prompt="verify", checks=[CommandCheck(command=check, timeout=300)])
    (done,) = preflight(ProjectCopies(Project(directory)), task, Policy())
    return done.run.ok, cannot_run(done, directory)


def verified(bug: Bug, pristine: Path, planted: Path, check: str) -> str:
    """'' when the suite passes untouched and fails with the bug; else what is wrong."""
    passes, broken = checks_as_run(pristine, check)
    if broken or not passes:
        return f"{bug.project}'s own suite does not pass untouched: {broken or 'it fails'}"
    fails, broken = checks_as_run(planted, check)
    if broken or fails:
        return f"{bug.id}: the planted bug {'cannot run: ' + str(broken) if broken else 'passes'}"
    return ""


# ---------------------------------------------------------------- solving


SUMMARY = re.compile(r"(passed on attempt \d+|no attempt passed) · (\d+) attempt\(s\).*? · "
                     r"(\d+)\+(\d+) tokens")  # fmt: skip


def solve(bug: Bug, directory: Path, check: str, strategy: str, memory: Path,
          args: argparse.Namespace, order: int) -> Outcome:  # fmt: skip
    argv = [sys.executable, "-m", "mulligan.cli", "solve", TASK, "--check", check,
            "--dir", str(directory), "--strategy", strategy, "--trials", str(args.trials),
            "--memory", str(memory), "--embedding", args.embedding, "--family", bug.project,
            "--base-url", args.base_url, "--yes", "--max-steps", str(args.max_steps),
            "--max-seconds", str(args.max_seconds), "--timeout", str(args.timeout),
            "--max-reply-tokens", str(args.max_reply_tokens)]  # fmt: skip
    argv += ["--protocol", args.protocol] if args.protocol else []
    argv += ["--model", args.model] if args.model else []
    started = time.monotonic()
    limit = args.trials * args.max_seconds + 900
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        done = subprocess.CompletedProcess(argv, -9, "", err + f"\nkilled after {limit:.0f}s")
    seconds = time.monotonic() - started
    err = done.stderr
    found = SUMMARY.search(err)
    run = re.search(r"run id: (\w+)", err)
    episodes = _episodes(memory, run.group(1)) if run else []
    silent = sum(1 for e in episodes for a in e.attempts if not any(s.tool_calls for s in a.steps))
    protocol = episodes[0].attempts[0].protocol if episodes and episodes[0].attempts else "?"
    return Outcome(bug.id, bug.project, strategy, protocol, order, done.returncode == 0,
        attempts=int(found.group(2)) if found else 0,
        tokens=int(found.group(3)) + int(found.group(4)) if found else 0,
        seconds=round(seconds, 1),
        given_lessons=len(re.findall(r"^attempt 1 was given: ", err, re.M)),
        silent_attempts=silent, exit=done.returncode,
        note="" if found else " ".join(err.strip().splitlines()[-1:])[:300],
    )  # fmt: skip


def _episodes(memory: Path, run_id: str) -> list[Episode]:
    log = EpisodeLog(memory / "episodes.db")
    return [e for row in log.episodes(run_id) if (e := log.episode(row["id"])) is not None]


def run_all(args: argparse.Namespace, sources: dict[str, Source], bugs: list[Bug]) -> list[Outcome]:
    work = Path(args.work).resolve()
    python = str(check_python(work)) if not args.smoke else ""
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    outcomes: list[Outcome] = []
    for name in dict.fromkeys(b.project for b in bugs):
        source = sources[name]
        pristine = fetch(source, work) if not args.smoke else work / "pristine" / name
        check = source.check.format(python=python)
        for strategy in args.strategies[:1] if args.verify else args.strategies:
            memory = work / "runs" / stamp / strategy / name / "memory"
            for order, bug in enumerate((b for b in bugs if b.project == name), 1):
                where = work / "runs" / stamp / strategy / bug.id / pristine.name  # as a user's
                planted = plant(bug, pristine, where)
                problem = verified(bug, pristine, planted, check)
                if problem:
                    raise SystemExit(problem)
                if args.verify:
                    print(f"{bug.id}: passes untouched, fails with the bug planted", flush=True)
                    continue
                outcome = solve(bug, planted, check, strategy, memory, args, order)
                outcomes.append(outcome)
                print(_line(outcome), file=sys.stderr, flush=True)
                if args.out:
                    with open(args.out, "a") as out:
                        out.write(json.dumps(asdict(outcome)) + "\n")
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
        outcomes = run_all(args, sources, bugs)
    print(table(outcomes))
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
    parser.add_argument("--table", help="print the table of an --out file and stop")
    parser.add_argument("--smoke", action="store_true", help="the scripted fake server")
    parser.add_argument("--verify", action="store_true", help="set up and check the bugs only")
    args = parser.parse_args(argv)
    args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    if args.table:
        rows = Path(args.table).read_text().splitlines()
        print(table([Outcome(**json.loads(line)) for line in rows if line.strip()]))
        return 0
    if args.smoke:
        return smoke(args)
    chosen = set(args.bugs.split(",")) if args.bugs else {b.id for b in BUGS}
    unknown = chosen - {b.id for b in BUGS}
    if unknown:
        parser.error(f"--bugs: unknown {', '.join(sorted(unknown))}")
    outcomes = run_all(args, SOURCES, [b for b in BUGS if b.id in chosen])
    if outcomes:
        print(table(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
