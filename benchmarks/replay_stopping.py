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
from mulligan.schema import Usage, Verdict
from mulligan.strategies.stopping import stop_rule


@dataclass
class Attempt:
    verdict: Verdict
    tokens: int
    reflector: int = 0
    """Of its tokens, the reflection made after it (because the episode went on)."""


AS_RUN, OWN, OWN_FIRST = "as run", "own checks", "own checks first"
RULES = (AS_RUN, OWN, OWN_FIRST)
"""`as run`: every feedback-visible check, the self-tests among them (the rule before);
`own checks`: the task's own alone (as if there were no self-tests); `own checks first`: the
task's own, the self-tests only on a task with none (the default now, `StopRule`)."""


def read_run(path: str, run_id: str, strategy: str) -> dict[str, list[Attempt]]:
    """Each episode's attempts of the strategy, in trial order."""
    log = EpisodeLog(path, read_only=True)
    runs = {}
    for row in log.episodes(run_id):
        episode = log.episode(row["id"]) if row["strategy"] == strategy else None
        if episode is not None:
            pairs = zip(episode.attempts, episode.verdicts, strict=True)
            runs[episode.task_id] = [
                Attempt(
                    v, a.usage.total_tokens, a.usage_by_role.get("reflector", Usage()).total_tokens
                )
                for a, v in pairs
            ]
    return runs


def ends(attempt: Attempt, rule: str) -> bool:
    """Whether the episode stops after this attempt under a rule."""
    if rule == OWN:
        return attempt.verdict.own_passed is not False  # nothing of the task's says try again
    return stop_rule("honest", own_checks_first=rule == OWN_FIRST).ends(attempt.verdict)


def stop(attempts: list[Attempt], k: int, rule: str) -> int:
    """How many attempts the episode makes with a budget of k under a rule."""
    for n, attempt in enumerate(attempts[:k], start=1):
        if ends(attempt, rule):
            return n
    return min(k, len(attempts))


def spent(attempts: list[Attempt], n: int) -> int:
    """Tokens of the first n attempts, the reflection after the n-th left out when it exists."""
    after = attempts[n - 1].reflector if n < len(attempts) else 0
    return sum(a.tokens for a in attempts[:n]) - after


def rewrite(
    runs: dict[str, list[Attempt]], strategy: str, source: str, target: str, rule: str
) -> int:
    """The run's outcome lines of the strategy, submitting as the rule does, with the tokens
    of the attempts it reads, renamed after the rule."""

    def change(outcome: dict[str, Any]) -> bool:
        attempts = runs.get(outcome["task"])
        if not attempts:
            return False
        drawn = [stop(attempts, k, rule) for k in range(1, len(outcome["submitted"]) + 1)]
        outcome["submitted"] = [attempts[n - 1].verdict.passed for n in drawn]
        outcome["tokens"] = [spent(attempts, n) for n in drawn]
        outcome["strategy"] = f"{strategy}-{rule.replace(' ', '-')}"
        return True

    return rewrite_lines(source, target, strategy, change)


def main() -> None:
    parser = replay_parser(__doc__)
    parser.add_argument("--strategy", default="retry", help="whose episodes (default: retry)")
    parser.add_argument(
        "--rule", choices=RULES[1:], default=OWN_FIRST, help="the rule --write replays"
    )
    args = parser.parse_args()
    runs = read_logged(
        parser, args, lambda: read_run(args.log, args.run_id, args.strategy), args.strategy
    )
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
            tokens = sum(spent(attempts, n) for attempts, n in drawn)
            cells.append(f"{right} · {n / tasks:.2f} · {tokens / tasks:,.0f}")
        oracle = sum(any(a.verdict.passed for a in attempts[:k]) for attempts in runs.values())
        print(f"| {k} | " + " | ".join(cells) + f" | {oracle} |")
    if args.outcomes:
        written = rewrite(runs, args.strategy, args.outcomes, args.write, args.rule)
        print(f"{written} outcome lines written to {args.write}")


if __name__ == "__main__":
    main()
