"""Reflexion's trial 2 under several carry-overs, all continuing the same logged trial 1s.

A paired bench run logs one trial 1 per task. For every task whose trial 1 failed, each
variant reflects on that same attempt and makes trial 2, `--samples` times. Per variant it
prints how many trial 2s passed and how many only repeated trial 1's answer (whitespace
aside), so carry-over prompts can be compared on identical inputs at a fraction of a
study's cost.

A variant is a carry mode, `full` or `lessons`, optionally with a folder of prompt files that
replace mulligan's own of the same name (as MULLIGAN_PROMPTS_DIR does): `full:DIR`.
The endpoint comes from the usual settings (OPENAI_BASE_URL, MULLIGAN_MODEL, ...); the
temperature, budgets, protocol and compression from the run's manifest.

    python benchmarks/carry_ab.py OUT/memory/episodes.db:RUN --suite humaneval \\
        --variants full:benchmarks/prompts/carry_before,full,lessons --samples 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any, cast

from mulligan.actor import ActorSettings
from mulligan.defaults import Carry
from mulligan.llm.connect import connect
from mulligan.loop import LoopSettings
from mulligan.memory.log import EpisodeLog
from mulligan.report.stats import same_answer, wilson
from mulligan.runs.build import actor_settings as actor_settings_of
from mulligan.runs.build import build_loop
from mulligan.runs.lifecycle import upgraded
from mulligan.runs.runner import episode_id
from mulligan.settings.loading import load_config
from mulligan.settings.run_config import RunConfig
from mulligan.tasks.suites import load_suite, select


def parse_variant(text: str) -> tuple[str, Carry, Path | None]:
    """(label, carry mode, prompt folder or None)."""
    mode, _, folder = text.partition(":")
    if mode not in ("full", "lessons"):
        sys.exit(f"--variants: {text!r} must start with full or lessons")
    if folder and not Path(folder).is_dir():
        sys.exit(f"--variants: {text!r}: no folder {folder}")
    return text, cast(Carry, mode), Path(folder).resolve() if folder else None


def logged_actor_settings(manifest: dict[str, Any]) -> ActorSettings:
    """The run's own actor settings (budget, compression, protocol), read from its manifest."""
    logged = upgraded(manifest)["config"]
    sections = {k: logged[k] for k in ("actor", "budget", "compression") if k in logged}
    return actor_settings_of(RunConfig.model_validate(sections))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", help="LOG:RUN_ID: an episodes.db, a paired run")
    parser.add_argument("--suite", help="the run's suite (humaneval, ...)")
    parser.add_argument("--data", help="the suite's data file, as given to bench")
    parser.add_argument("--feedback", help="the suite's --feedback, as given to bench")
    parser.add_argument("--variants", default="full,lessons")
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--limit", type=int, help="only the first N failed tasks")
    parser.add_argument("--tasks", help="only these failed tasks (ids, comma-separated)")
    parser.add_argument("--out", type=Path, help="append one JSON line per trial 2 here")
    parser.add_argument(
        "--table", type=Path, nargs="+", help="only print the table from --out files"
    )
    args = parser.parse_args()
    if args.table:  # runs stopped early, or split by --tasks, included
        print_table([row for path in args.table for row in read_rows(path)])
        return
    if not args.run or not args.suite:
        parser.error("give a run (LOG:RUN_ID) and its --suite, or --table FILE")

    path, _, run_id = args.run.rpartition(":")
    log = EpisodeLog(Path(path))
    run = log.run(run_id)
    if run is None:
        sys.exit(f"no run {run_id} in {path}")
    manifest = json.loads(run["manifest"])
    source = manifest.get("first_attempt_from")
    if not source:
        sys.exit(f"run {run_id} is not a paired run: it has no shared trial 1")
    suite = load_suite(args.suite, data=args.data, feedback=args.feedback or "em")
    tasks = {t.id: t for t in select(suite.tasks, ids=manifest["task_order"])}
    failed = []
    for task_id in manifest["task_order"]:
        made = log.episode(episode_id(run_id, source, task_id))
        if made and made.verdicts and not made.verdicts[0].passed:
            failed.append((tasks[task_id], made.attempts[0], made.verdicts[0]))
    if args.tasks:
        wanted = {i.strip() for i in args.tasks.split(",")}
        failed = [f for f in failed if f[0].id in wanted]
    failed = failed[: args.limit] if args.limit else failed
    print(f"{len(failed)} tasks failed trial 1 in {run_id} ({source})", file=sys.stderr)

    config = load_config({"temperature": manifest.get("temperature")})
    model = connect(config.endpoint, default_temperature=0.7)
    chosen = logged_actor_settings(manifest)
    variants = [parse_variant(text) for text in args.variants.split(",")]
    loops = {
        label: build_loop(model, LoopSettings(strategy="reflexion", trials=2, carry=mode), chosen)
        for label, mode, _ in variants
    }
    rows: list[dict[str, Any]] = []
    # sample, then task, then variant: a run stopped early still compares like with like
    for sample in range(args.samples):
        for task, attempt, verdict in failed:
            for label, _, folder in variants:
                if folder:
                    os.environ["MULLIGAN_PROMPTS_DIR"] = str(folder)
                else:
                    os.environ.pop("MULLIGAN_PROMPTS_DIR", None)
                episode = loops[label].run_episode(task, drawn={1: (attempt, verdict)})
                second = episode.attempts[1] if len(episode.attempts) > 1 else None
                row = {
                    "variant": label,
                    "sample": sample,
                    "task": task.id,
                    "passed": episode.passed,
                    "repeated": second is not None and same_answer(attempt.answer, second.answer),
                    "answer": second.answer if second else None,
                }
                rows.append(row)
                print(f"{label}\t{sample}\t{task.id}\tpassed={episode.passed}", file=sys.stderr)
                if args.out:
                    with args.out.open("a") as handle:
                        handle.write(json.dumps(row) + "\n")
    print_table(rows)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The lines an --out file holds; a line that is not one names its file and number."""
    try:
        text = path.read_text()
    except OSError as exc:
        sys.exit(f"--table {path}: {exc.strerror or exc}")
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            row = json.loads(line)
            if not {"variant", "passed", "repeated"} <= set(row):
                raise ValueError("needs variant, passed and repeated")
        except (ValueError, TypeError) as exc:
            sys.exit(f"{path}, line {number}: not a carry_ab.py --out line ({exc})")
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    """Per variant, in order of first appearance: trial 2s, passed, repeated trial 1."""
    tally: dict[str, Counter[str]] = {}
    for row in rows:
        counts = tally.setdefault(row["variant"], Counter())
        counts["n"] += 1
        counts["passed"] += int(row["passed"])
        counts["repeated"] += int(row["repeated"])
    print("| carry-over | trial 2s | passed (95% CI) | repeated trial 1's answer |")
    print("|---|---|---|---|")
    for label, counts in tally.items():
        n, k, same = counts["n"], counts["passed"], counts["repeated"]
        low, high = wilson(k, n)
        print(
            f"| {label} | {n} | {k} = {100 * k / n:.0f}% [{100 * low:.0f}–{100 * high:.0f}] | "
            f"{same} = {100 * same / n:.0f}% |"
        )


if __name__ == "__main__":
    main()
