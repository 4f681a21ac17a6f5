"""Replay retry on a logged run with its self-tests left out of stopping: no model call.

Honest stopping ends a retry episode at its first attempt whose feedback-visible checks all
pass. With `--self-tests`, those checks include the model's own asserts, and a wrong one fails
a right answer and sends retry on past it. This reads a run's retry episodes from the episode
log and submits, at every budget k, what retry stopping by the task's own feedback-visible
checks alone would have: the first of the first k attempts that passes all of them, else the
k-th; a task with no such check ends after attempt 1, as honest stopping does when nothing
says try again. Retry's attempts are fresh samples that see no check, and the replay stops no
later than the run did, so it is exact: every attempt it reads was drawn.

    python benchmarks/replay_retry.py study/memory/episodes.db RUN_ID \
        --outcomes study/outcomes.jsonl --write retry-own-checks.outcomes.jsonl

`--write` copies the run's retry outcome lines, submitting as the replay does with the tokens
of the attempts it draws, renamed `retry-own-checks`, so `benchmarks/compare_runs.py` pairs
them with select and the rest. The self-tests' writing is charged to neither (it is the
task's, once).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from mulligan.memory.log import EpisodeLog
from mulligan.schema import Verdict


@dataclass
class Attempt:
    verdict: Verdict
    tokens: int

    @property
    def own_checks(self) -> bool | None:
        """All the task's own feedback-visible checks passed; None: it has none."""
        own = [c for c in self.verdict.checks if c.visibility == "feedback" and not c.self_test]
        return all(c.passed for c in own) if own else None


def read_run(path: str, run_id: str) -> dict[str, list[Attempt]]:
    """Each retry episode's attempts, in trial order."""
    log = EpisodeLog(path, read_only=True)
    runs = {}
    for row in log.episodes(run_id):
        episode = log.episode(row["id"]) if row["strategy"] == "retry" else None
        if episode is not None:
            pairs = zip(episode.attempts, episode.verdicts, strict=True)
            runs[episode.task_id] = [Attempt(v, a.usage.total_tokens) for a, v in pairs]
    return runs


def ends(attempt: Attempt, rule: str) -> bool:
    """Whether retry stops after this attempt under a rule: `as run` (every feedback-visible
    check, the self-tests among them), `own checks` (the task's own alone), `own checks
    first` (the task's own; the self-tests only on a task with none of its own)."""
    own = attempt.own_checks
    if rule == AS_RUN or (rule == OWN_FIRST and own is None):
        return attempt.verdict.visible_passed is not False
    return own is not False  # passed them all, or nothing says try again


AS_RUN, OWN, OWN_FIRST = "as run", "own checks", "own checks first"
RULES = (AS_RUN, OWN, OWN_FIRST)


def stop(attempts: list[Attempt], k: int, rule: str = OWN) -> int:
    """How many attempts retry draws with a budget of k under a rule."""
    for n, attempt in enumerate(attempts[:k], start=1):
        if ends(attempt, rule):
            return n
    return min(k, len(attempts))


def rewrite(runs: dict[str, list[Attempt]], source: str, target: str, rule: str) -> int:
    """The run's retry outcome lines, submitting as the rule does, with the tokens of the
    attempts it draws, renamed after the rule."""
    lines = []
    with open(source, encoding="utf-8") as handle:
        for line in handle:
            outcome = json.loads(line)
            attempts = runs.get(outcome["task"]) if outcome["strategy"] == "retry" else None
            if not attempts:
                continue
            budgets = range(1, len(outcome["submitted"]) + 1)
            drawn = [stop(attempts, k, rule) for k in budgets]
            outcome["submitted"] = [attempts[n - 1].verdict.passed for n in drawn]
            outcome["tokens"] = [sum(a.tokens for a in attempts[:n]) for n in drawn]
            outcome["strategy"] = "retry-" + rule.replace(" ", "-")
            lines.append(json.dumps(outcome))
    with open(target, "w", encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in lines)
    return len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log", help="the run's episodes.db")
    parser.add_argument("run_id")
    parser.add_argument("--outcomes", help="the run's outcomes.jsonl, to rewrite")
    parser.add_argument("--write", help="where the rewritten outcomes go (with --outcomes)")
    parser.add_argument(
        "--rule", choices=RULES[1:], default=OWN, help="the stopping rule --write replays"
    )
    args = parser.parse_args()
    if bool(args.outcomes) != bool(args.write):
        parser.error("--outcomes and --write go together")
    if not Path(args.log).is_file():
        parser.error(f"{args.log}: no such file; pass a run's episode log, OUT/memory/episodes.db")
    try:
        runs = read_run(args.log, args.run_id)
    except sqlite3.DatabaseError as error:
        parser.error(f"{args.log}: not an episode log ({error}); pass OUT/memory/episodes.db")
    if not runs:
        raise SystemExit(f"{args.log}: no retry episode of run {args.run_id}")
    budget = max(len(attempts) for attempts in runs.values())
    tasks = len(runs)
    print(f"run {args.run_id}: {tasks} tasks; each rule: submitted answers the hidden checks "
          "pass · attempts a task · tokens a task")  # fmt: skip
    print("| budget | " + " | ".join(RULES) + " | oracle |")
    print("|---|" + "---|" * (len(RULES) + 1))
    for k in range(1, budget + 1):
        cells = []
        for rule in RULES:
            drawn = [(attempts, stop(attempts, k, rule)) for attempts in runs.values()]
            right = sum(attempts[n - 1].verdict.passed for attempts, n in drawn)
            n = sum(n for _, n in drawn)
            tokens = sum(sum(a.tokens for a in attempts[:n]) for attempts, n in drawn)
            cells.append(f"{right} · {n / tasks:.2f} · {tokens / tasks:,.0f}")
        oracle = sum(any(a.verdict.passed for a in attempts[:k]) for attempts in runs.values())
        print(f"| {k} | " + " | ".join(cells) + f" | {oracle} |")
    if args.outcomes:
        written = rewrite(runs, args.outcomes, args.write, args.rule)
        print(f"{written} outcome lines written to {args.write}")


if __name__ == "__main__":
    main()
