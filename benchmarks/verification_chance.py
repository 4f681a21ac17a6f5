"""How well verification tells a useful lesson from one that changes nothing, by its rules.

Verification pairs a candidate lesson on a few tasks, one attempt with it and one without
(docs/memory.md). With sampling, a pair can help or hurt by chance alone. This prints, for
each number of pairs and each `validity.validate_after`, the exact chance that a lesson
with no effect is validated, and that a lesson which raises a task's pass rate by `--lift`
is, at the pass rate the attempts without a lesson have (`--pass-rate`). With a study's
memory and run id, it reads that run's verification from the log instead: the pass rate
its attempts without a lesson had, and the status each verified lesson would have under
each `validate_after`. Nothing calls a model.

    python benchmarks/verification_chance.py --pass-rate 0.6 --lift 0.2
    python benchmarks/verification_chance.py --memory OUT/memory --run RUN_ID
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mulligan.memory.log import EpisodeLog
from mulligan.memory.validity import ValiditySection, by_chance, status_of
from mulligan.studies.verify import logged_without, verify_run_id

AFTER = (1, 2, 3)


def chance_table(pass_rate: float, lift: float, pairs: list[int]) -> None:
    print(f"pass rate without a lesson {pass_rate:.0%}; a useful lesson lifts it by {lift:+.0%}")
    print("pairs | validate_after | no effect: validated · refuted | useful: validated · refuted")
    for n in pairs:
        for after in AFTER:
            rules = ValiditySection(validate_after=after)
            null = by_chance(n, pass_rate, rules)
            useful = by_chance(n, pass_rate, rules, min(1.0, pass_rate + lift))
            print(
                f"{n:5} | {after:14} | {null.validated:17.0%} · {null.refuted:7.0%} | "
                f"{useful.validated:14.0%} · {useful.refuted:7.0%}"
            )


def replay(memory: Path, run_id: str) -> float | None:
    """Each verified lesson of the run's verification, under each `validate_after`; returns
    the pass rate of its attempts without a lesson."""
    log = EpisodeLog(memory / "episodes.db", read_only=True)
    passed, told = logged_without(log, verify_run_id(run_id))
    if not told:
        print(f"{verify_run_id(run_id)}: no attempt without a lesson in {memory}")
        return None
    print(f"{verify_run_id(run_id)}: attempts without a lesson passed {passed} of {told}")
    ids = {e["lesson_id"] for e in log.lesson_events() if e["event"] == "verified"}
    lessons = [x for x in log.lessons(sorted(ids)) if x.validity.evidence.pairs]
    print("lesson | pairs · helped · hurt | " + " | ".join(f"validate_after {a}" for a in AFTER))
    counts = {a: dict.fromkeys(("validated", "refuted", "candidate"), 0) for a in AFTER}
    for lesson in lessons:
        e = lesson.validity.evidence
        statuses = [status_of(e.helped, e.hurt, ValiditySection(validate_after=a)) for a in AFTER]
        for a, status in zip(AFTER, statuses, strict=True):
            counts[a][status] += 1
        print(f"{lesson.id} | {e.pairs} · {e.helped} · {e.hurt} | " + " | ".join(statuses))
    for a in AFTER:
        print(f"validate_after {a}: " + ", ".join(f"{k} {v}" for k, v in counts[a].items()))
    return passed / told


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pass-rate", type=float, default=0.6)
    parser.add_argument("--lift", type=float, default=0.2)
    parser.add_argument("--pairs", default="2,3,4,6", help="numbers of pairs, comma-separated")
    parser.add_argument("--memory", type=Path, help="a study's memory directory")
    parser.add_argument("--run", help="the study's run id (with --memory)")
    args = parser.parse_args()
    pass_rate = args.pass_rate
    if args.memory and args.run:
        pass_rate = replay(args.memory, args.run) or pass_rate
        print()
    chance_table(pass_rate, args.lift, [int(n) for n in args.pairs.split(",")])


if __name__ == "__main__":
    main()
