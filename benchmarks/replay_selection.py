"""Replay the selection rule on a select run's logged candidates: no model call, no sandbox.

For every task of the run, each candidate's feedback-visible results and verdict are read
from the episode log (`EpisodeLog`), and its behaviour on the probe inputs is read back from
the logged clusters (candidates in one cluster behaved the same). For every budget k, the
rule (`mulligan.evaluator.agreement`) then draws candidates as the select strategy would
(`to_draw`): until no further one could change the pick, or also stopping at the first that
passes every visible check (`stop_at_pass`, the default, which submits that candidate); and
picks among those drawn (`choose`). Dual agreement alone ranks every cluster as if it passed
none of the task's own checks (the rule before the task's checks came first). Prints, per
budget, how many submitted answers the hidden checks pass under each, against the run's own
picks and an oracle's; then the candidates drawn and the tokens a task each way of drawing spends.

    python benchmarks/replay_selection.py study/memory/episodes.db RUN_ID \
        --outcomes study/outcomes.jsonl --write replayed.outcomes.jsonl

`--outcomes` (the run's outcomes file, as `mulligan report` wrote it) with `--write`: a copy
whose select lines submit what the default rule (stopping at a pass) picks, renamed
`select-replayed`, with the tokens of the candidates it draws, so
`benchmarks/compare_runs.py` pairs it with other runs.

Candidates a run never drew (it stopped once its pick was decided) are not invented, so a
rule that would have drawn more is scored on fewer: the replay is a lower bound for it, and
exact for a rule that stops no later than the run did.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from replay_io import read_logged, replay_parser, rewrite_lines

from mulligan.evaluator.agreement import Evidence, choose, evidence, tests_of, to_draw
from mulligan.memory.log import EpisodeLog
from mulligan.schema import Selection, Usage, Verdict


@dataclass
class Candidate:
    evidence: Evidence
    verdict: Verdict
    tokens: int = 0
    """What drawing it cost (its selector charge left out: that is the task's, once)."""

    @property
    def right(self) -> bool:
        """Scored as the run scores a submitted answer (`Verdict.passed`)."""
        return self.verdict.passed


@dataclass
class Replayed:
    """One task's logged candidates, the selection the run recorded, and what writing its
    probe inputs and separating cost (paid once, whatever is drawn)."""

    candidates: list[Candidate]
    selection: Selection
    selector_tokens: int = 0


def read_run(path: str, run_id: str) -> dict[str, Replayed]:
    """Each task's candidates in trial order, with the selection its last one records."""
    log = EpisodeLog(path, read_only=True)
    runs = {}
    for row in log.episodes(run_id):
        episode = log.episode(row["id"]) if row["strategy"] == "select" else None
        selection = episode.selection if episode else None
        if episode is None or selection is None:
            continue
        cluster = {t: n for n, members in enumerate(selection.clusters) for t in members}
        candidates, selector = [], 0
        for attempt, verdict in zip(episode.attempts, episode.verdicts, strict=True):
            trial = attempt.trial
            found = evidence(trial, verdict, [f"cluster {cluster.get(trial, -trial)}"])
            runs_at_all = trial not in selection.crashed
            charged = attempt.usage_by_role.get("selector", Usage()).total_tokens
            selector += charged
            tokens = attempt.usage.total_tokens - charged
            candidates.append(Candidate(replace(found, runs=runs_at_all), verdict, tokens))
        runs[episode.task_id] = Replayed(candidates, selection, selector)
    return runs


def drawn(candidates: list[Candidate], k: int, at_pass: bool | None) -> list[Candidate]:
    """The candidates the rule draws with a budget of k, in waves as the loop draws them
    (`at_pass`: stopping at a full visible pass too; None: all k)."""
    if at_pass is None:
        return candidates[:k]
    made: list[Candidate] = []
    while len(made) < min(k, len(candidates)):
        found, verdicts = [c.evidence for c in made], [c.verdict for c in made]
        wave = to_draw(found, verdicts, k - len(made), at_pass=at_pass)
        if not wave:
            break
        made = candidates[: len(made) + wave]
    return made


def submitted(
    candidates: list[Candidate], k: int, own_first: bool, at_pass: bool | None = None
) -> Candidate:
    """The candidate the rule picks with a budget of k (drawn as `drawn` says)."""
    first = drawn(candidates, k, at_pass)
    found = [c.evidence if own_first else replace(c.evidence, given=0) for c in first]
    tests = tests_of([c.verdict for c in first])
    trial = choose(found, tests, at_pass=bool(at_pass)).trial
    return next(c for c in first if c.evidence.trial == trial)


def spent(task: Replayed, k: int, at_pass: bool | None) -> int:
    """Tokens a task costs with a budget of k: the candidates drawn and the selector's calls."""
    return sum(c.tokens for c in drawn(task.candidates, k, at_pass)) + task.selector_tokens


def rewrite(runs: dict[str, Replayed], source: str, target: str) -> int:
    """The run's outcome lines for select, submitting the default rule's picks (stopping at a
    pass) with the tokens of what it draws."""

    def change(outcome: dict[str, Any]) -> bool:
        task = runs.get(outcome["task"])
        if task is None:
            return False
        budgets = range(1, len(outcome["submitted"]) + 1)
        outcome["submitted"] = [submitted(task.candidates, k, True, True).right for k in budgets]
        outcome["tokens"] = [spent(task, k, True) for k in budgets]
        outcome["strategy"] = "select-replayed"
        return True

    return rewrite_lines(source, target, "select", change)


def main() -> None:
    parser = replay_parser(__doc__)
    args = parser.parse_args()
    runs = read_logged(parser, args, lambda: read_run(args.log, args.run_id), "select")
    budget = max(len(task.candidates) for task in runs.values())
    print(f"run {args.run_id}: {len(runs)} tasks, submitted answers the hidden checks pass")
    print("| budget | the run's picks | the task's checks first | stopping at a pass too "
          "| dual agreement alone | oracle |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for k in range(1, budget + 1):
        logged = own = at_pass = alone = oracle = 0
        for task in runs.values():
            picks = task.selection.picks
            pick = picks[min(k, len(picks)) - 1]
            logged += next(c for c in task.candidates if c.evidence.trial == pick).right
            own += submitted(task.candidates, k, True, False).right
            at_pass += submitted(task.candidates, k, True, True).right
            alone += submitted(task.candidates, k, own_first=False).right
            oracle += any(c.right for c in task.candidates[:k])
        print(f"| {k} | {logged} | {own} | {at_pass} | {alone} | {oracle} |")
    print("\ncandidates drawn and tokens a task (probe inputs included; the self-tests not)")
    print("| budget | as logged | until decided | stopping at a pass too |")
    print("|---|---|---|---|")
    for k in range(1, budget + 1):
        cells = []
        for stop in (None, False, True):  # as logged, until decided, stopping at a pass
            n = sum(len(drawn(t.candidates, k, stop)) for t in runs.values())
            tokens = sum(spent(t, k, stop) for t in runs.values())
            cells.append(f"{n / len(runs):.2f} · {tokens / len(runs):,.0f}")
        print(f"| {k} | " + " | ".join(cells) + " |")
    if args.outcomes:
        print(f"{rewrite(runs, args.outcomes, args.write)} outcome lines written to {args.write}")


if __name__ == "__main__":
    main()
