"""The report's section on selection: for every strategy, how often the submitted answer was
right when some attempt or candidate was (selection accuracy against an oracle that picks a
right one whenever there is one), the self-tests' false-pass and false-alarm rates, how a
selection strategy decided, and which model gave the feedback.

Computed after the fact from the hidden verdicts of every attempt: the hidden verdicts of
candidates that were not submitted are read here, for the report, and by nothing that
decides. Success against cost for every strategy, its coverage beside it, is the report's
frontier (frontier.py)."""

from __future__ import annotations

import html
from collections import Counter

from mulligan.report.repeats import Table
from mulligan.report.stats import RunStats, StrategyStats
from mulligan.report.tables import Piece, html_table, markdown_table, pct
from mulligan.runs.lifecycle import configured

NOTE = (
    "Coverage: the tasks where some attempt (or candidate) passed the hidden checks, what an "
    "oracle picking among the draws would score. Selection accuracy: of those, the share whose "
    "submitted answer passed them (an oracle picking among the same attempts scores 100%). A "
    "strategy that stops at its first visible pass submits that attempt; a selection strategy "
    "submits the candidate its agreement rule picks. False pass: of attempts whose self-tests "
    "all passed, the share the hidden checks failed; false alarm: of attempts the hidden checks "
    "passed, the share a self-test failed. Success against tokens, seconds and dollars for "
    "every strategy, with each one's coverage: the section on success against cost."
)


def accuracy_rows(stats: RunStats) -> Table:
    header = ["strategy", "tasks", "coverage: some attempt passed", "submitted passed"]
    header += ["selection accuracy"]
    header += ["self-test false pass", "self-test false alarm"]
    rows = []
    for s in stats.strategies:
        if not s.tasks:
            continue
        right, picked = _oracle(s)
        tested = s.self_tested
        rows.append(
            [s.label, str(s.tasks), str(right), str(picked), pct(picked, right)]
            + [pct(tested.false_passes, tested.self_passed) if tested.attempts else "-"]
            + [pct(tested.false_alarms, tested.hidden_passed) if tested.attempts else "-"]
        )
    return header, rows


def _oracle(s: StrategyStats) -> tuple[int, int]:
    """(tasks where some attempt passed, of them those whose submitted answer passed)."""
    some = [task for task, passed in s.any_passed.items() if passed and passed[-1]]
    return len(some), sum(1 for task in some if s.submitted[task][-1])


def fell_short(s: StrategyStats) -> str:
    """Whether the draws or the pick fell short: tasks where no draw passed the hidden
    checks, and tasks where one did but the submitted answer did not."""
    right, picked = _oracle(s)
    return (
        f"{s.label}: some draw passed the hidden checks on {right} of {s.tasks} tasks "
        f"(coverage), the submitted answer on {picked}: the draws fell short on "
        f"{s.tasks - right}, the pick on {right - picked}."
    )


def decision_lines(stats: RunStats) -> list[str]:
    """Per selection strategy: where it fell short, which rule decided, candidates set
    aside, separations."""
    lines = []
    for s in stats.strategies:
        if not s.selections:
            continue
        lines.append(fell_short(s))
        rules = Counter(selection.rule for selection in s.selections)
        decided = ", ".join(f"{rule} {n}" for rule, n in rules.most_common())
        crashed = sum(len(selection.crashed) for selection in s.selections)
        tried = sum(1 for selection in s.selections if selection.separation)
        probes = sum(selection.probes for selection in s.selections) / len(s.selections)
        lines.append(
            f"{s.label}: decided by {decided}; {probes:.1f} probe inputs a task; {crashed} "
            f"candidates ran on no input and were set aside; finalists separated in {tried} "
            f"tasks, decided by it in {rules.get('separation', 0)}."
        )
    feedback = configured(stats.manifest, "reflector", "model")
    if feedback:
        lines.append(
            f"Feedback model: {feedback} wrote the reflections, self-tests and selection inputs "
            "(the reflector, tester and selector columns of the role table)."
        )
    return lines


def selection_section(stats: RunStats) -> Piece:
    header, rows = accuracy_rows(stats)
    if not rows:
        return [], []
    lines = decision_lines(stats)
    md = ["## Selection", "", NOTE, "", markdown_table(header, rows), ""]
    md += [f"- {line}" for line in lines] + ([""] if lines else [])
    page = ["<h2>Selection</h2>", f"<p>{html.escape(NOTE)}</p>", html_table(header, rows)]
    return md, page + [f"<p>{html.escape(line)}</p>" for line in lines]
