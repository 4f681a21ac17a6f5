"""The persistent agent's study, its figures (`persistent_agent.py`): what each session's arms
solved, what the session did to the memory and what chance alone would have done, the attempts
shown a lesson against the baseline's own draws there, and the table of them, all read from the
sessions' episodes and the memory's log."""

from __future__ import annotations

from typing import Any

from mulligan.memory.log import EpisodeLog
from mulligan.memory.validity import GENERAL, ValiditySection, by_chance_while_working


def arm_numbers(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "tasks": len(episodes),
        "solved": sum(bool(e["passed"]) for e in episodes),
        "first": sum(
            bool(e["attempts"] and e["attempts"][0]["verdict"]["passed"]) for e in episodes
        ),
        "tokens": sum(e["usage"]["total_tokens"] for e in episodes),
        "passed": {e["task_id"]: bool(e["passed"]) for e in episodes},
    }


def memory_numbers(log: EpisodeLog, run_id: str, rules: ValiditySection) -> dict[str, Any]:
    """What the session did to the memory, and what chance alone would have done."""
    mine = {row["id"] for row in log.episodes(run_id)}
    events = [e for e in log.lesson_events() if e["episode_id"] in mine]
    created = [e["lesson_id"] for e in events if e["event"] == "created"]
    general = [x.id for x in log.lessons(created) if x.kind in GENERAL]
    passed, told = log.withheld_halves()
    every = {e["lesson_id"] for e in log.lesson_events()}
    tried = [x for x in log.lessons(sorted(every)) if x.validity.evidence.pairs]
    rate = passed / told if told else None
    luck = [by_chance_while_working(x.validity.evidence.pairs, rate, rules) for x in tried] if (
        rate is not None
    ) else []  # fmt: skip
    statuses = [x.validity.status for x in log.lessons(sorted(every)) if x.kind in GENERAL]
    return {
        "written": len(general),
        "validated": sum(e["event"] == "status:validated" for e in events),
        "refuted": sum(e["event"] == "status:refuted" for e in events),
        "pairs": sum(e["event"] == "verified" for e in events),
        "withheld_pass_rate": rate,
        "lessons_with_pairs": len(tried),
        "chance_validated": sum(x.validated for x in luck),
        "chance_refuted": sum(x.refuted for x in luck),
        "store": {s: statuses.count(s) for s in sorted(set(statuses))},
    }


def shown_numbers(
    log: EpisodeLog, run_id: str, without: list[dict[str, Any]]
) -> dict[str, int | None]:
    """The memory arm's attempts shown a lesson (a candidate by assignment, or a validated
    one) and how many passed; the baseline's own draws at the same tasks and trials, where it
    made one, and how many of those passed: with --paired the arms differ only there. And the
    direction of every pair so far (the store's evidence, across sessions)."""
    drawn = {
        (e["task_id"], a["trial"]): a["verdict"]["passed"] for e in without for a in e["attempts"]
    }
    shown = [
        (episode.task_id, attempt.trial, verdict.passed)
        for row in log.episodes(run_id)
        if (episode := log.episode(row["id"])) is not None
        for attempt, verdict in zip(episode.attempts, episode.verdicts, strict=False)
        if attempt.lesson_ids
    ]
    there = [drawn[task, trial] for task, trial, _ in shown if (task, trial) in drawn]
    every = {e["lesson_id"] for e in log.lesson_events()}
    evidence = [x.validity.evidence for x in log.lessons(sorted(every))]
    return {
        "attempts": len(shown),
        "passed": sum(passed for *_, passed in shown),
        "baseline_there": len(there),
        "baseline_passed": sum(there),
        "pairs_helped": sum(e.helped for e in evidence),
        "pairs_hurt": sum(e.hurt for e in evidence),
    }


def table(rows: list[dict[str, Any]], strategy: str, baseline: str) -> str:
    head = (
        f"| session | tasks | solved {strategy} | solved {baseline} | only {strategy} | only "
        f"{baseline} | p | first attempt {strategy} / {baseline} | tokens {strategy} / "
        f"{baseline} | shown a lesson: passed / {baseline}'s draws there | lessons written | "
        "validated | refuted | pairs this session (all so far: helped · hurt) | by chance: "
        "validated · refuted |"
    )
    lines = [head, "|" + "---|" * 15]
    for n, row in enumerate(rows, start=1):
        m, b, k = row["memory"], row["baseline"], row["lessons"]
        shown = row["shown"]
        seen = f"{shown['passed']} of {shown['attempts']} / {shown['baseline_passed']} of " \
            f"{shown['baseline_there']}"  # fmt: skip
        directions = "" if shown["pairs_helped"] is None else (
            f" ({shown['pairs_helped']} · {shown['pairs_hurt']})")  # fmt: skip
        lines.append(
            f"| {n} | {m['tasks']} | {m['solved']} | {b['solved']} | {row['only_memory']} | "
            f"{row['only_baseline']} | {row['p']:.3f} | {m['first']} / {b['first']} | "
            f"{m['tokens']:,} / {b['tokens']:,} | {seen} | {k['written']} | {k['validated']} | "
            f"{k['refuted']} | {k['pairs']}{directions} | {k['chance_validated']:.1f} · "
            f"{k['chance_refuted']:.1f} of {k['lessons_with_pairs']} |"
        )
    return "\n".join(lines)
