"""Replay a logged run's sequential episodes under another honest stopping rule: no model call.

Honest stopping ends an episode at its first attempt whose feedback-visible checks all pass.
With `--self-tests`, the rule before read every one of them, the model's own asserts among
them, and a wrong one failed a right answer and sent the episode on past it; the default now
reads the task's own checks first (`loop.own_checks_first`). This reads a run's episodes of
one strategy (`--strategy`, default retry; reflexion too) from the episode log and submits,
at every budget k, what each rule would have: the first of the first k attempts it stops at,
else the k-th. A rule that stops earlier needs only attempts the run made before it went on,
made the same whatever the rule (an attempt depends on the ones before it, never on the
rule), so the replay is exact for a rule that stops no later than the run did: the task's own
checks (alone, or first) against a run that read every check.

    python benchmarks/replay_stopping.py study/memory/episodes.db RUN_ID \
        --outcomes study/outcomes.jsonl --write retry-own-first.outcomes.jsonl

`--write` copies the run's outcome lines of the strategy, submitting as `--rule` does with the
tokens of the attempts it reads (a reflection after the last one left out: it was made only
because the run went on), renamed `STRATEGY-RULE`, so `benchmarks/compare_runs.py` pairs
them with other runs. The self-tests' writing is charged to neither (it is the task's, once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replay_io import read_logged, replay_parser, rewrite_lines

from mulligan.memory.log import EpisodeLog
from mulligan.report.stats import AtBudget, by_budget
from mulligan.schema import Episode, Verdict
from mulligan.strategies.stopping import StopRule, stop_rule


@dataclass(frozen=True)
class OwnChecksAlone(StopRule):
    """The task's own checks alone, as if there were no self-tests (for comparison only)."""

    def ends(self, verdict: Verdict) -> bool:
        return verdict.own_passed is not False  # nothing of the task's says try again


AS_RUN, OWN, OWN_FIRST = "as run", "own checks", "own checks first"
RULES: dict[str, StopRule] = {
    AS_RUN: stop_rule("honest", own_checks_first=False),
    OWN: OwnChecksAlone(OWN, "the task's own checks alone", oracle=False),
    OWN_FIRST: stop_rule("honest", own_checks_first=True),
}
"""`as run`: every feedback-visible check, the self-tests among them (the rule before);
`own checks`: the task's own alone (as if there were no self-tests); `own checks first`: the
task's own, the self-tests only on a task with none (the default now, `StopRule`)."""


def read_run(path: str, run_id: str, strategy: str) -> dict[str, Episode]:
    """Each episode of the strategy, by task."""
    log = EpisodeLog(path, read_only=True)
    runs = {}
    for row in log.episodes(run_id):
        episode = log.episode(row["id"]) if row["strategy"] == strategy else None
        if episode is not None:
            runs[episode.task_id] = episode
    return runs


def budgets(episode: Episode, trials: int, rule: str) -> list[AtBudget]:
    """What the episode submits at each budget 1..trials under the rule, as a report reads a
    run (`by_budget`: the attempt, whether it passed, the tokens up to it)."""
    return by_budget(episode, trials, RULES[rule])


def rewrite(runs: dict[str, Episode], strategy: str, source: str, target: str, rule: str) -> int:
    """The run's outcome lines of the strategy, submitting as the rule does, with the tokens
    of the attempts it reads, renamed after the rule."""

    def change(outcome: dict[str, Any]) -> bool:
        episode = runs.get(outcome["task"])
        if episode is None or not episode.attempts:
            return False
        found = budgets(episode, len(outcome["submitted"]), rule)
        outcome["submitted"] = [b.passed for b in found]
        outcome["tokens"] = [b.tokens for b in found]
        outcome["strategy"] = f"{strategy}-{rule.replace(' ', '-')}"
        return True

    return rewrite_lines(source, target, strategy, change)


def main() -> None:
    parser = replay_parser(__doc__)
    parser.add_argument("--strategy", default="retry", help="whose episodes (default: retry)")
    parser.add_argument(
        "--rule", choices=[OWN, OWN_FIRST], default=OWN_FIRST, help="the rule --write replays"
    )
    args = parser.parse_args()
    runs = read_logged(
        parser, args, lambda: read_run(args.log, args.run_id, args.strategy), args.strategy
    )
    budget = max(len(episode.attempts) for episode in runs.values())
    tasks = len(runs)
    print(f"run {args.run_id}: {tasks} tasks; each rule: submitted answers the hidden checks "
          "pass · attempts a task · tokens a task")  # fmt: skip
    print("| budget | " + " | ".join(RULES) + " | oracle |")
    print("|---|" + "---|" * (len(RULES) + 1))
    read = {rule: [budgets(e, budget, rule) for e in runs.values()] for rule in RULES}
    for k in range(1, budget + 1):
        cells = []
        for rule in RULES:
            at = [found[k - 1] for found in read[rule]]
            right, n = sum(b.passed for b in at), sum(b.trial for b in at)
            tokens = sum(b.tokens for b in at)
            cells.append(f"{right} · {n / tasks:.2f} · {tokens / tasks:,.0f}")
        oracle = sum(found[k - 1].any_passed for found in read[AS_RUN])
        print(f"| {k} | " + " | ".join(cells) + f" | {oracle} |")
    if args.outcomes:
        written = rewrite(runs, args.strategy, args.outcomes, args.write, args.rule)
        print(f"{written} outcome lines written to {args.write}")


if __name__ == "__main__":
    main()
