"""The report's tables and the notes that explain them, built from a run's numbers."""

from __future__ import annotations

import html
import itertools
import re
import time

from mulligan import strategies
from mulligan.report import repeats
from mulligan.report.paired import PAIRED_HEADER, pair_table, paired_cells, tokens_per_extra_success
from mulligan.report.repeats import Block, Table
from mulligan.report.stats import RunStats, StrategyStats, logged_stop_rule, wilson
from mulligan.schema import Role, Usage

ROLES: tuple[Role, ...] = ("actor", "summariser", "reflector", "judge")

PAIRED_NOTE = (
    "Task by task over the tasks both strategies ran: solved by both, only by A, only by B, "
    "by neither. McNemar p is the exact two-sided binomial test on the tasks only one solved "
    "(below 0.05: unlikely to be chance). B − A is the difference in success rate, with a "
    "seeded paired bootstrap 95% interval (an interval that contains 0 shows no clear "
    "difference). Tokens per extra success: the tokens B spent beyond A for each task more "
    "that it solved."
)
SUCCESS_NOTE = (
    "Submitted answer passed, t trials: the answer an episode with a budget of t trials "
    "submits (its first attempt whose feedback-visible checks all passed, else its t-th) "
    "passed the hidden checks too: the honest score. Any attempt passed: some attempt passed, "
    "which only an oracle could pick. Brackets are Wilson 95% intervals; n is the number of "
    "tasks."
)
LATER_NOTE = (
    "Rescued: tasks whose trial 1 failed and a later trial solved. Repeated: trials after the "
    "first whose answer was the previous trial's answer again, whitespace aside; an attempt "
    "that repeats the one before cannot rescue anything."
)
FIRST_NOTE = (
    "Trial 1 of a strategy that starts empty against trial 1 of a strategy with the memory, "
    "on the tasks the memory showed something (lessons retrieved from other tasks, or a "
    "case): only A counts tasks it hurt, only B tasks it helped. On the other tasks the "
    "memory arm's trial 1 is the one without memory (shared in a paired study)."
)


def moment(seconds: float | None) -> str:
    """A time as the report and the viewer print it (UTC), "-" when there is none."""
    if not seconds:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


Piece = tuple[list[str], list[str]]
"""A part of the report, as markdown lines and as HTML lines."""


def inline(markdown_line: str) -> str:
    """**bold** and `code` of a markdown line as HTML, the rest escaped."""
    escaped = html.escape(markdown_line)
    escaped = re.sub(r"\*\*([^*]*)\*\*", r"<strong>\1</strong>", escaped)
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", escaped)


def blocks(items: list[Block]) -> Piece:
    """Paragraphs and tables."""
    md: list[str] = []
    page: list[str] = []
    for item in items:
        if isinstance(item, str):
            md += [item, ""]
            page.append(f"<p>{inline(item)}</p>")
        else:
            md += [markdown_table(*item), ""]
            page.append(html_table(*item))
    return md, page


def section(title: str, items: list[Block]) -> Piece:
    """A section of paragraphs and tables (none without any)."""
    if not items:
        return [], []
    md, page = blocks(items)
    return [f"## {title}", "", *md], [f"<h2>{html.escape(title)}</h2>", *page]


def images(files: dict[str, str]) -> Piece:
    """Plots (file: alt text), a paragraph each in markdown, side by side in HTML."""
    tags = "".join(f"<img src='{name}' alt='{alt}'>" for name, alt in files.items())
    md = [line for name, alt in files.items() for line in (f"![{alt}]({name})", "")]
    return md, [f"<div class='plots'>{tags}</div>"]


def pct(k: int, n: int) -> str:
    if not n:
        return "-"
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {100 * k / n:.0f}% [{100 * lo:.0f}–{100 * hi:.0f}]"


def setting_lines(stats: RunStats) -> list[str]:
    """What the figures come from, said before any of them."""
    rule = logged_stop_rule(stats.manifest)
    lines = [f"**{rule.description[0].upper()}{rule.description[1:]}.**"]
    if rule.oracle:
        lines.append(
            "The submitted-answer columns below are what an honest stop would have submitted "
            "from the same attempts (the first whose visible checks all passed)."
        )
    if stats.manifest.get("feedback") == "em":
        lines.append(
            "**Oracle feedback:** `--feedback em` shows each attempt whether its answer matches "
            "the gold answer, so the visible check is the grader itself (as in Reflexion's "
            "HotpotQA setup); multi-trial figures here are oracle figures by construction."
        )
    return lines


def budgets_shown(trials: int) -> list[int]:
    """The trial budgets the success table has a column for: all of them up to 4, else the
    first two, the middle one and the last (the plot shows every budget)."""
    if trials <= 4:
        return list(range(1, trials + 1))
    return sorted({1, 2, (trials + 1) // 2, trials})


def success_rows(stats: RunStats) -> Table:
    """The honest score at each trial budget, and the oracle's pick beside it."""
    trials = stats.trials
    shown = budgets_shown(trials)
    header = ["strategy", "n"]
    header += [f"submitted answer passed, {t} trial{'s' * (t > 1)} (95% CI)" for t in shown]
    header += [f"any attempt passed, {trials} trials (oracle's pick)"]
    rows = []
    for s in stats.strategies:
        row = [s.label, str(s.tasks)]
        row += [pct(s.solved_by_trial[t - 1], s.tasks) if s.solved_by_trial else "-" for t in shown]
        row += [pct(s.any_by_trial[-1], s.tasks) if s.any_by_trial else "-"]
        rows.append(row)
    return header, rows


def priced(stats: RunStats) -> bool:
    """Some call had a price above 0: only then are dollars worth a column (a local or
    scripted model costs 0, an unpriced one is unknown: its cost is its tokens and time)."""
    return any(s.cost for s in stats.strategies)


def cost_note(stats: RunStats) -> str:
    """Said instead of the dollar columns when no price is known."""
    if priced(stats):
        return ""
    if any(s.cost is None for s in stats.strategies):
        return (
            "No price is known for this model, so its cost is unknown: it is the tokens and "
            "seconds above (`--price-in`/`--price-out` or `MULLIGAN_PRICES` give dollars)."
        )
    return (
        "Every call was priced at 0 (a local or scripted model): its cost is the tokens and "
        "seconds above."
    )


def cost_rows(stats: RunStats) -> Table:
    """Per task: attempts, steps, tokens, time, and dollars where a price is known."""
    money = priced(stats)
    header = ["strategy", "attempts/task", "steps/task", "prompt tok/task", "completion tok/task"]
    header += ["wall s/task", "tokens/success"]
    header += ["cost/task ($)", "cost/success ($)"] if money else []
    rows = []
    for s in stats.strategies:
        row = [
            s.label,
            f"{s.per_task(s.attempts):.2f}",
            f"{s.per_task(s.steps):.1f}",
            f"{s.per_task(s.prompt_tokens):,.0f}",
            f"{s.per_task(s.completion_tokens):,.0f}",
            f"{s.per_task(s.seconds):.2f}",
            f"{s.tokens_per_success:,.0f}" if s.tokens_per_success else "-",
        ]
        cost, success = s.cost, s.cost_per_success
        if money and cost is None:
            row += ["unknown", "unknown"]
        elif money and cost is not None:
            row += [f"{s.per_task(cost):.4f}", "-" if success is None else f"{success:.4f}"]
        rows.append(row)
    return header, rows


def _roles(stats: RunStats) -> tuple[Role, ...]:
    extra: tuple[Role, ...] = ("tester", "selector")
    return ROLES + tuple(r for r in extra if any(r in s.by_role for s in stats.strategies))


def role_rows(stats: RunStats) -> Table:
    """Tokens per task by role: what each strategy's extra calls cost.
    Attempts logged before the split was kept show as `unsplit`."""
    unsplit = {
        s.label: s.tokens - sum(u.total_tokens for u in s.by_role.values())
        for s in stats.strategies
    }
    legacy = any(unsplit.values())
    roles = _roles(stats)
    header = ["strategy"] + [f"{role} tok/task" for role in roles]
    header += ["unsplit tok/task"] if legacy else []
    rows = []
    for s in stats.strategies:
        split = [s.by_role.get(role, Usage()) for role in roles]
        row = [s.label] + [f"{s.per_task(u.total_tokens):,.0f}" for u in split]
        row += [f"{s.per_task(unsplit[s.label]):,.0f}"] if legacy else []
        rows.append(row)
    return header, rows


def model_rows(stats: RunStats) -> Table:
    """The attempts' tokens per task by the model that made them; no rows unless some
    strategy's attempts were made by more than one model (`escalate`)."""
    models = sorted({m for s in stats.strategies for m in s.by_model})
    header = ["strategy"] + [f"{model} tok/task" for model in models]
    if not any(len(s.by_model) > 1 for s in stats.strategies):
        return header, []
    rows = [
        [s.label] + [f"{s.per_task(s.by_model.get(m, Usage()).total_tokens):,.0f}" for m in models]
        for s in stats.strategies
    ]
    return header, rows


def role_cost_rows(stats: RunStats) -> Table:
    """Dollars per task by role; no rows when no price is known."""
    roles = _roles(stats)
    header = ["strategy"] + [f"{role} $/task" for role in roles]
    if not priced(stats):
        return header, []
    costs = [[s.by_role.get(role, Usage()).cost for role in roles] for s in stats.strategies]
    rows = [
        [s.label] + ["unknown" if c is None else f"{s.per_task(c):.4f}" for c in split]
        for s, split in zip(stats.strategies, costs, strict=True)
    ]
    return header, rows


def task_rows(stats: RunStats) -> Table:
    header = ["task"] + [s.label for s in stats.strategies]
    rows = []
    for task_id in stats.task_ids:
        row = [task_id]
        for s in stats.strategies:
            if stats.repeats > 1:
                row.append(repeats.task_cell(s, task_id))
            elif task_id not in s.solved_at:
                row.append("not run")
            else:
                trial = s.solved_at[task_id]
                row.append(f"solved (trial {trial})" if trial else "unsolved")
        rows.append(row)
    return header, rows


def lesson_rows(stats: RunStats) -> Table:
    header = ["strategy", "lessons written", "retrieved", "validated", "refuted"]
    rows = [
        [s.label]
        + [str(s.lessons.get(k, 0)) for k in ("written", "retrieved", "validated", "refuted")]
        for s in stats.strategies
        if (strategy := strategies.known(s.strategy)) is None or strategy.reflects
    ]
    return header, rows


def submitted_passed(s: StrategyStats, by_trial: int | None = None) -> dict[str, bool]:
    """Per task, whether the submitted answer passed (with a budget of `by_trial` trials)."""
    return {task: passed[(by_trial or len(passed)) - 1] for task, passed in s.submitted.items()}


def _share_tasks(a: StrategyStats, b: StrategyStats) -> bool:
    """A pair with no task finished by both has nothing to compare (a run stopped early)."""
    return any(task in b.solved_at for task in a.solved_at)


def paired_rows(stats: RunStats) -> Table:
    """Every pair of strategies that finished a task in common, task by task (the bootstrap
    seeded by the run's seed)."""
    header = PAIRED_HEADER + ["tokens per extra success (B over A)"]
    rows = []
    for a, b in itertools.combinations(stats.strategies, 2):
        if not _share_tasks(a, b):
            continue
        passed = submitted_passed(a), submitted_passed(b)
        table = pair_table(*passed)
        extra = tokens_per_extra_success(
            a.tokens,
            b.tokens,
            table.both + table.only_a,
            table.both + table.only_b,
        )
        spent = "-" if extra is None else f"{extra:,.0f}" + (" (B spent less)" if extra < 0 else "")
        cells = paired_cells(*passed, stats.seed, {**a.units, **b.units})
        rows.append([a.label, b.label, *cells, spent])
    return header, rows


def shown_only(passed: dict[str, bool], shown: set[str]) -> dict[str, bool]:
    """The tasks whose trial 1 the memory showed something: on the others the memory arm's
    trial 1 is the no-memory one (shared in a paired study), equal by construction."""
    return {task: value for task, value in passed.items() if task in shown}


def shown_memory_row(plain: StrategyStats, b: StrategyStats, seed: int) -> list[str]:
    """Trial 1 without memory against trial 1 of the arm `b` with it, on the tasks the memory
    showed it something."""
    mine = shown_only(submitted_passed(b, 1), b.shown_first)
    cells = paired_cells(submitted_passed(plain, 1), mine, seed, b.units)
    return [f"{plain.label}, trial 1", f"{b.label}, trial 1 (shown memory)", *cells]


def first_trial_rows(stats: RunStats) -> Table:
    """Trial 1 without memory against trial 1 with it, on the tasks the memory showed
    something: where retrieved lessons hurt or help."""
    plain = next((s for s in stats.strategies if _shares_first(s)), None)
    rows = [
        shown_memory_row(plain, b, stats.seed)
        for b in stats.strategies
        if plain and not _shares_first(b) and b.shown_first and _share_tasks(plain, b)
    ]
    return PAIRED_HEADER, rows


def _shares_first(s: StrategyStats) -> bool:
    strategy = strategies.known(s.strategy)
    return strategy is None or strategy.shares_first_attempt


def later_trial_rows(stats: RunStats) -> Table:
    """Only when some strategy made a trial after the first."""
    header = ["strategy", "trial 1 failed", "rescued later", "later trials", "repeated answer"]
    if not any(s.later_trials for s in stats.strategies):
        return header, []
    rows = [
        [
            s.label,
            str(s.failed_first),
            pct(s.rescued, s.failed_first),
            str(s.later_trials),
            pct(s.repeated_answers, s.later_trials),
        ]
        for s in stats.strategies
    ]
    return header, rows
