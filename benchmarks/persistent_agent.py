"""A persistent agent's study: a stream of tasks in sessions, as a user would run them.

The stream (a seeded sample of the suite) is cut into sessions; each session is one
`mulligan run` in a new process. The memory arm (`--strategy`, default retry[memory]) runs
every session on one memory directory, so what it learns and verifies while working in one
session is there in the next; the arm without memory (`--baseline`, default retry: the same
strategy reading no store) runs the same tasks with the same seed, each session on a log of
its own. Per session it prints, for both arms, how many tasks were solved (the submitted
answer's hidden verdict) and first attempts passed, the tokens spent, and for the memory arm
the lessons written, validated and refuted in that session, the pairs made while working,
and what chance alone would have done: the number of the lessons with pairs so far that a
lesson changing nothing would have had validated and refuted by as many pairs
(`validity.by_chance_while_working`, at the pass rate of the attempts a candidate was
withheld from). Then each session paired: tasks only the memory arm solved, only the
baseline, and McNemar's exact p; and the attempts shown a lesson, how many passed, against
the baseline's own draws at the same tasks and trials (with --paired the arms differ only
there), with every pair's direction so far. The table goes to OUT/persistent.md, every number to
OUT/persistent.json.

    python benchmarks/persistent_agent.py mbpp --data mbpp.jsonl --sessions 5 \\
        --per-session 40 --trials 3 --seed 1 --out study-persistent -- \\
        --base-url http://127.0.0.1:8011/v1 --model qwen2.5-coder-1.5b
    python benchmarks/persistent_agent.py --smoke --out /tmp/persistent-smoke

Arguments after `--` go to every `mulligan run` (the endpoint, `--reflector-model`,
`--concurrency`, ...); `mulligan serve` keeps one local model up across the sessions.
`--resume` continues a study in OUT: a killed session resumes, and a larger --sessions extends
it (the stream is recorded in OUT/stream.json; new sessions come from the tasks not yet in it,
in the suite's seeded order). `--kind WORD` draws the stream from the tasks whose prompt names
WORD alone: tasks that recur in kind, as one project's would, so that a lesson one task wrote
is retrieved by others of its kind and can be verified while working.
`--lessons FILE` imports a lesson file (`mulligan memory export`'s lines; `id` and `text` are
enough, with `scope.family` the suite's) into the memory arm's memory before its first session:
lessons someone else wrote, each a candidate that earns its place by the same assignment, so a
study can tell whether better lessons than the reflector's would help this actor at all.
`--smoke` runs three short sessions on a synthetic suite against the package's fake
endpoint (a model that answers right only with the lesson it writes in view): a check that
the study runs, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from persistent_figures import arm_numbers, memory_numbers, shown_numbers, table
from persistent_smoke import smoke_endpoint

from mulligan.memory.log import EpisodeLog
from mulligan.memory.validity import ValiditySection
from mulligan.report.paired import pair_table
from mulligan.schema import Task
from mulligan.tasks.suites import load_suite, select


def sessions_of(
    suite: str,
    data: str | None,
    sessions: int,
    per: int,
    seed: int,
    out: Path,
    resume: bool,
    kind: str | None = None,
) -> list[list[str]]:
    """The stream: a seeded sample of sessions x per tasks, in sessions, recorded in
    OUT/stream.json. Resumed with more sessions, a study keeps the sessions it recorded and
    draws the new ones from the tasks not yet in it, in the suite's seeded order (a sample of
    another size is another sample, so drawing again would change the earlier sessions).
    With a `kind`, only the tasks whose prompt names it (case aside) are drawn."""
    tasks = load_suite(suite, data=data).tasks
    if kind is not None:
        if not kind.strip():
            raise SystemExit("--kind: blank; name the text the stream's prompts share (tuple)")
        tasks = [task for task in tasks if kind.lower() in task.prompt.lower()]
        if not tasks:
            raise SystemExit(f"--kind {kind!r}: no task of {suite} names it in its prompt")
    recorded = out / "stream.json"
    if resume and recorded.exists():
        kept = json.loads(recorded.read_text())
        stream: list[list[str]] = kept["sessions"]
        if (kept["seed"], len(stream[0]), kept.get("kind")) != (seed, per, kind):
            drawn = f" and --kind {kept['kind']!r}" if kept.get("kind") else ""
            raise SystemExit(
                f"{recorded}: the study was drawn with --seed {kept['seed']}, --per-session "
                f"{len(stream[0])}{drawn}; resume it with those"
            )
    else:
        stream = drawn_before(tasks, per, seed, out) if resume else []
        stream = stream or first_draw(tasks, sessions, per, seed)
    taken = {i for ids in stream for i in ids}
    rest = [task.id for task in select(tasks, sample=len(tasks), seed=seed) if task.id not in taken]
    while len(stream) < sessions and len(rest) >= per:
        stream.append(rest[:per])
        rest = rest[per:]
    stream = [ids for ids in stream if ids]
    out.mkdir(parents=True, exist_ok=True)
    recorded.write_text(
        json.dumps({"seed": seed, "sessions": stream} | ({"kind": kind} if kind else {}))
    )
    return stream[:sessions]


def first_draw(tasks: list[Task], sessions: int, per: int, seed: int) -> list[list[str]]:
    ids = [task.id for task in select(tasks, sample=min(sessions * per, len(tasks)), seed=seed)]
    return [ids[n * per : (n + 1) * per] for n in range(sessions)]


def drawn_before(tasks: list[Task], per: int, seed: int, out: Path) -> list[list[str]]:
    """The stream of a study that kept sessions before the stream was recorded: the first
    draw, of any size that holds its kept sessions, whose sessions match the tasks each kept
    session ran."""
    kept = {
        int(f.name.split("-")[1]): {e["task_id"] for e in json.loads(f.read_text())[1]}
        for f in out.glob("session-*-baseline.json")
    }
    if not kept:
        return []
    for size in range(max(kept), len(tasks) // per + 1):
        stream = first_draw(tasks, size, per, seed)
        if all(set(stream[n - 1]) == ids for n, ids in kept.items()):
            return stream
    raise SystemExit(
        f"{out}: its sessions are not a draw of this suite with --seed {seed} and "
        f"--per-session {per}; resume it with the flags it was started with"
    )


def unfinished_run(memory: Path) -> str | None:
    """The run a killed session left in this arm's log, to be resumed: its newest run if
    that did not finish."""
    if not (memory / "episodes.db").exists():
        return None
    runs = EpisodeLog(memory / "episodes.db", read_only=True).runs()
    newest = max(runs, key=lambda run: run["started_at"], default=None)
    return newest["id"] if newest and newest["status"] != "finished" else None


def import_lessons(path: str, memory: Path, passed: list[str]) -> None:
    """The file's lessons into the memory arm's memory, once, before its first session: a
    resume, or a call after a kill that had imported them, finds them there and imports
    nothing; lessons not there once a session has run are refused (the sessions before would
    have worked without them)."""
    try:
        lines = Path(path).read_text().splitlines()
        ids = [str(json.loads(line)["id"]) for line in lines if line.strip()]
    except (OSError, ValueError, KeyError, TypeError):
        ids = []  # the import below says what is wrong with the file, and where
    log = EpisodeLog(memory / "episodes.db", read_only=True) if (
        memory / "episodes.db"
    ).exists() else None  # fmt: skip
    if ids and log and log.known_ids(ids) == set(ids):
        return
    if log and log.runs():
        sys.exit(f"persistent_agent.py: --lessons {path}: the memory arm has worked sessions "
                 "without these lessons; a study's lessons go in before its first session: "
                 "resume with the file it started with, or start a new --out")  # fmt: skip
    at = next((n for n, flag in enumerate(passed) if flag.split("=")[0] == "--embedding"), None)
    embedding = [] if at is None else passed[at : at + (1 if "=" in passed[at] else 2)]
    argv = [sys.executable, "-m", "mulligan.cli", "memory", "import", path, "--memory",
            str(memory), *embedding]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"persistent_agent.py: --lessons {path}: {done.stderr.strip()}")


def run_session(
    suite: str,
    ids: list[str],
    strategy: str,
    memory: Path,
    args: argparse.Namespace,
    more: list[str],
) -> tuple[str, list[dict[str, Any]]]:
    """One session in a new process: its run id and one JSON record per episode. A session
    a kill cut short is resumed from its own log (`mulligan run --resume`), so its finished
    episodes, lessons and evidence stand and none is counted twice."""
    killed = unfinished_run(memory)
    argv = [sys.executable, "-m", "mulligan.cli", "run", suite, "--ids", ",".join(ids),
            "--strategy", strategy, "--trials", str(args.trials), "--seed", str(args.seed),
            "--memory", str(memory), "--json", *(["--data", args.data] if args.data else []),
            *(["--resume", killed] if killed else []), *more, *args.passed]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=environment(args))
    if done.returncode not in (0, 1):
        sys.exit(f"persistent_agent.py: {strategy} session failed:\n{done.stderr[-2000:]}")
    run_id = done.stderr.split("run id:")[1].split()[0]
    return run_id, [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def environment(args: argparse.Namespace) -> dict[str, str]:
    if not args.smoke:
        return dict(os.environ)
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}


def session_arm(
    suite: str, n: int, ids: list[str], arm: str, args: argparse.Namespace
) -> tuple[str, list[dict[str, Any]]]:
    """One arm of session n: run it, or with --resume read what an earlier call kept of it
    (OUT/session-N-ARM.json, written when the arm ended), so no session is run twice."""
    out = Path(args.out)
    kept = out / f"session-{n}-{arm}.json"
    if args.resume and kept.exists():
        run_id, episodes = json.loads(kept.read_text())
        if {e["task_id"] for e in episodes} == set(ids):
            return run_id, episodes
    strategy, memory = (args.strategy, out / "memory") if arm == "memory" else (
        args.baseline, out / f"baseline-{n}"
    )  # fmt: skip
    paired = args.paired and arm == "memory"
    more = ["--draws-from", str(out / f"baseline-{n}")] if paired else []
    run_id, episodes = run_session(suite, ids, strategy, memory, args, more)
    kept.write_text(json.dumps([run_id, episodes]))
    return run_id, episodes


def study(suite: str, stream: list[list[str]], args: argparse.Namespace) -> list[dict[str, Any]]:
    out = Path(args.out)
    rows: list[dict[str, Any]] = []
    earlier = json.loads((out / "persistent.json").read_text()) if (
        args.resume and (out / "persistent.json").exists()
    ) else []  # fmt: skip
    if args.lessons:
        import_lessons(args.lessons, out / "memory", args.passed)
    for n, ids in enumerate(stream, start=1):
        _, without = session_arm(suite, n, ids, "baseline", args)  # (first: --paired reuses it)
        run_id, with_memory = session_arm(suite, n, ids, "memory", args)
        kept = [row for row in earlier if row["session"] == n and row["run_id"] == run_id]
        log = EpisodeLog(out / "memory" / "episodes.db", read_only=True)
        if kept:  # its memory figures as they stood when it ended, not as they stand now
            if "shown" not in kept[0]:  # kept from before the figure: its attempts' part
                shown = shown_numbers(log, run_id, without)
                kept[0]["shown"] = shown | {"pairs_helped": None, "pairs_hurt": None}
            rows.append(kept[0])
            continue
        m, b = arm_numbers(with_memory), arm_numbers(without)
        paired = pair_table(m["passed"], b["passed"])
        rules = ValiditySection(validate_after=args.validate_after, refute_after=args.refute_after)
        rows.append({
            "session": n, "run_id": run_id, "memory": m, "baseline": b,
            "only_memory": paired.only_a, "only_baseline": paired.only_b, "p": paired.p,
            "lessons": memory_numbers(log, run_id, rules),
            "shown": shown_numbers(log, run_id, without),
        })  # fmt: skip
        (out / "persistent.json").write_text(json.dumps(rows, indent=1))
        print(f"session {n}: {args.strategy} {m['solved']}/{m['tasks']}, "
              f"{args.baseline} {b['solved']}/{b['tasks']}", file=sys.stderr)  # fmt: skip
    return rows


def split_at_dashes(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" not in argv:
        return argv, []
    at = argv.index("--")
    return argv[:at], argv[at + 1 :]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", nargs="?", help="humaneval, mbpp, or a task file")
    parser.add_argument("--data", help="the suite's data file, as `mulligan run --data`")
    parser.add_argument("--sessions", type=int, help="default 5 (--smoke: 3, at most 3)")
    parser.add_argument("--per-session", type=int, default=40)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--kind",
        help="draw only tasks whose prompt names this text: a stream whose tasks recur in kind, "
        "as one project's would",
    )
    parser.add_argument("--strategy", default="retry[memory]", help="the memory arm")
    parser.add_argument("--baseline", default="retry", help="the same strategy without memory")
    parser.add_argument("--validate-after", type=int, default=ValiditySection().validate_after)
    parser.add_argument("--refute-after", type=int, default=ValiditySection().refute_after)
    parser.add_argument(
        "--lessons",
        metavar="FILE",
        help="lessons (JSON lines, as `mulligan memory export` writes) imported into the memory "
        "arm's memory before its first session, each a candidate",
    )
    parser.add_argument("--out", required=True, help="a new directory for the memories")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep OUT's finished sessions, resume one a kill cut short, run the rest",
    )
    parser.add_argument(
        "--paired",
        action="store_true",
        help="the memory arm reuses the baseline's draws where it shows nothing (run "
        "--draws-from): the arms differ only in the attempts shown a lesson",
    )
    parser.add_argument("--smoke", action="store_true", help="short sessions, fake endpoint")
    mine, passed = split_at_dashes(sys.argv[1:])
    args = parser.parse_args(mine)
    args.passed = passed  # after --: flags for every `mulligan run`
    out = Path(args.out)
    if args.smoke:
        args.sessions, args.per_session = min(args.sessions or 3, 3), 4
        with smoke_endpoint(args) as suite:
            stream = sessions_of(
                suite, None, args.sessions, 4, args.seed, out, args.resume, args.kind
            )
            rows = study(suite, stream, args)
    else:
        if not args.suite:
            parser.error("name a suite (humaneval, mbpp or a task file), or pass --smoke")
        stream = sessions_of(
            args.suite,
            args.data,
            args.sessions or 5,
            args.per_session,
            args.seed,
            out,
            args.resume,
            args.kind,
        )
        rows = study(args.suite, stream, args)
    (out / "persistent.json").write_text(json.dumps(rows, indent=1))
    text = table(rows, args.strategy, args.baseline)
    (out / "persistent.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
