"""Replay the selection rule on a select run's logged candidates: no model call, no sandbox.

For every task of the run, each candidate's feedback-visible results and verdict are read
from the episode log (`EpisodeLog`), and its behaviour on the probe inputs is read back from
the logged clusters (candidates in one cluster behaved the same). The current rule
(`mulligan.evaluator.agreement.choose`) then picks among the first k candidates, for every
budget k, and so does dual agreement alone (every cluster ranked as if it passed none of the
task's own checks: the rule before the task's checks came first). Prints, per budget, how
many submitted answers the hidden checks pass under each, against the run's own picks and
an oracle's.

    python benchmarks/replay_selection.py study/memory/episodes.db RUN_ID \
        --outcomes study/outcomes.jsonl --write replayed.outcomes.jsonl

`--outcomes` (the run's outcomes file, as `mulligan report` wrote it) with `--write`: a copy
whose select lines submit what the current rule picks, renamed `select-replayed`, the tokens
and any-attempt columns unchanged, so `benchmarks/compare_runs.py` pairs it with other runs.

Candidates a run never drew (it stopped once its pick was decided) are not invented, so a
rule that would have drawn more is scored on fewer: the replay is a lower bound for it.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path

from mulligan.evaluator.agreement import Evidence, choose, evidence, tests_of
from mulligan.memory.log import EpisodeLog
from mulligan.schema import Selection, Verdict


@dataclass
class Candidate:
    evidence: Evidence
    verdict: Verdict

    @property
    def right(self) -> bool:
        """Scored as the run scores a submitted answer (`Verdict.passed`)."""
        return self.verdict.passed


def read_run(path: str, run_id: str) -> dict[str, tuple[list[Candidate], Selection]]:
    """Each task's candidates in trial order, with the selection its last one records."""
    log = EpisodeLog(path, read_only=True)
    runs = {}
    for row in log.episodes(run_id):
        episode = log.episode(row["id"]) if row["strategy"] == "select" else None
        selection = episode.selection if episode else None
        if episode is None or selection is None:
            continue
        cluster = {t: n for n, members in enumerate(selection.clusters) for t in members}
        candidates = []
        for attempt, verdict in zip(episode.attempts, episode.verdicts, strict=True):
            trial = attempt.trial
            found = evidence(trial, verdict, [f"cluster {cluster.get(trial, -trial)}"])
            runs_at_all = trial not in selection.crashed
            candidates.append(Candidate(replace(found, runs=runs_at_all), verdict))
        runs[episode.task_id] = (candidates, selection)
    return runs


def submitted(candidates: list[Candidate], k: int, own_first: bool) -> Candidate:
    """The candidate the rule picks among the first k."""
    first = candidates[:k]
    found = [c.evidence if own_first else replace(c.evidence, given=0) for c in first]
    tests = tests_of([c.verdict for c in first])
    trial = choose(found, tests).trial
    return next(c for c in first if c.evidence.trial == trial)


def rewrite(runs: dict[str, tuple[list[Candidate], Selection]], source: str, target: str) -> int:
    """The run's outcome lines for select, submitting the current rule's picks."""
    lines = []
    with open(source, encoding="utf-8") as handle:
        for line in handle:
            outcome = json.loads(line)
            if outcome["strategy"] != "select" or outcome["task"] not in runs:
                continue
            candidates, _ = runs[outcome["task"]]
            budgets = range(1, len(outcome["submitted"]) + 1)
            outcome["submitted"] = [submitted(candidates, k, True).right for k in budgets]
            outcome["strategy"] = "select-replayed"
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
        raise SystemExit(f"{args.log}: no select episode of run {args.run_id}")
    budget = max(len(c) for c, _ in runs.values())
    print(f"run {args.run_id}: {len(runs)} tasks, submitted answers the hidden checks pass")
    print("| budget | the run's picks | the task's checks first | dual agreement alone | oracle |")
    print("|---|---|---|---|---|")
    for k in range(1, budget + 1):
        logged = own = alone = oracle = 0
        for candidates, selection in runs.values():
            drawn = candidates[:k]
            pick = selection.picks[min(k, len(selection.picks)) - 1]
            logged += next(c for c in candidates if c.evidence.trial == pick).right
            own += submitted(candidates, k, own_first=True).right
            alone += submitted(candidates, k, own_first=False).right
            oracle += any(c.right for c in drawn)
        print(f"| {k} | {logged} | {own} | {alone} | {oracle} |")
    if args.outcomes:
        print(f"{rewrite(runs, args.outcomes, args.write)} outcome lines written to {args.write}")


if __name__ == "__main__":
    main()
