"""report.md, report.html and the plots, rebuilt from the episode log alone."""

from __future__ import annotations

import html
import json
import re
import shlex
import time
from pathlib import Path

from mulligan.bench import plots
from mulligan.bench.paired import (
    bootstrap_difference,
    mcnemar_exact,
    pair_table,
    tokens_per_extra_success,
)
from mulligan.bench.stats import RunStats, StrategyStats, collect, wilson
from mulligan.memory.log import EpisodeLog
from mulligan.schema import Role, Usage

ROLES: tuple[Role, ...] = ("actor", "summariser", "reflector", "judge")

GENERATED = "Generated at "
PAIRED_NOTE = (
    "Task by task over the tasks both strategies ran: solved by both, only by A, only by B, "
    "by neither. McNemar p is the exact two-sided binomial test on the tasks only one solved "
    "(below 0.05: unlikely to be chance). B − A is the difference in success rate, with a "
    "seeded paired bootstrap 95% interval (an interval that contains 0 shows no clear "
    "difference). Tokens per extra success: the tokens B spent beyond A for each task more "
    "that it solved."
)
LATER_NOTE = (
    "Rescued: tasks whose trial 1 failed and a later trial solved. Repeated: trials after the "
    "first whose answer was the previous trial's answer again, whitespace aside; an attempt "
    "that repeats the one before cannot rescue anything."
)
FIRST_NOTE = (
    "Trial 1 of a strategy that starts empty against trial 1 of reflexion-memory, which "
    "starts with lessons retrieved from other tasks: only A counts tasks the lessons hurt, "
    "only B tasks they helped."
)


def _when(seconds: float | None) -> str:
    if not seconds:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def title(stats: RunStats) -> str:
    label = stats.manifest.get("label")
    base = f"mulligan study {stats.run_id}"
    return f"{base}: {label}" if label else base


def _pct(k: int, n: int) -> str:
    if not n:
        return "-"
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {100 * k / n:.0f}% [{100 * lo:.0f}–{100 * hi:.0f}]"


def summary_rows(stats: RunStats) -> tuple[list[str], list[list[str]]]:
    trials = max((len(s.solved_by_trial) for s in stats.strategies), default=1)
    header = ["strategy", "n"] + [f"solved by trial {t} (95% CI)" for t in range(1, trials + 1)]
    header += ["attempts/task", "steps/task", "prompt tok/task", "completion tok/task"]
    header += ["cost/task ($)", "wall s/task", "tokens/success", "cost/success ($)"]
    rows = []
    for s in stats.strategies:
        row = [s.label, str(s.tasks)] + [_pct(k, s.tasks) for k in s.solved_by_trial]
        row += [
            f"{s.per_task(s.attempts):.2f}",
            f"{s.per_task(s.steps):.1f}",
            f"{s.per_task(s.prompt_tokens):,.0f}",
            f"{s.per_task(s.completion_tokens):,.0f}",
            "unknown" if s.cost is None else f"{s.per_task(s.cost):.4f}",
            f"{s.per_task(s.seconds):.2f}",
            f"{s.tokens_per_success:,.0f}" if s.tokens_per_success else "-",
            "unknown" if s.cost is None else _maybe(s.cost_per_success, "{:.4f}"),
        ]
        rows.append(row)
    return header, rows


def _maybe(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def role_rows(stats: RunStats) -> tuple[list[str], list[list[str]]]:
    """Tokens (and dollars) per task by role: what each strategy's extra calls cost.
    Attempts logged before the split was kept show as `unsplit`."""
    unsplit = {
        s.label: s.prompt_tokens + s.completion_tokens - _split_tokens(s) for s in stats.strategies
    }
    legacy = any(unsplit.values())
    header = ["strategy"] + [f"{role} tok/task" for role in ROLES]
    header += ["unsplit tok/task"] if legacy else []
    header += [f"{role} $/task" for role in ROLES]
    rows = []
    for s in stats.strategies:
        split = [s.by_role.get(role, Usage()) for role in ROLES]
        row = [s.label] + [f"{s.per_task(u.total_tokens):,.0f}" for u in split]
        row += [f"{s.per_task(unsplit[s.label]):,.0f}"] if legacy else []
        row += ["unknown" if u.cost is None else f"{s.per_task(u.cost):.4f}" for u in split]
        rows.append(row)
    return header, rows


def _split_tokens(s: StrategyStats) -> int:
    return sum(u.total_tokens for u in s.by_role.values())


def task_rows(stats: RunStats) -> tuple[list[str], list[list[str]]]:
    header = ["task"] + [s.label for s in stats.strategies]
    rows = []
    for task_id in stats.task_ids:
        row = [task_id]
        for s in stats.strategies:
            if task_id not in s.solved_at:
                row.append("not run")
            else:
                trial = s.solved_at[task_id]
                row.append(f"solved (trial {trial})" if trial else "unsolved")
        rows.append(row)
    return header, rows


def lesson_rows(stats: RunStats) -> tuple[list[str], list[list[str]]]:
    header = ["strategy", "lessons written", "retrieved", "validated", "refuted"]
    rows = [
        [s.label]
        + [str(s.lessons.get(k, 0)) for k in ("written", "retrieved", "validated", "refuted")]
        for s in stats.strategies
        if s.strategy.startswith("reflexion")
    ]
    return header, rows


PAIRED_HEADER = ["A", "B", "n", "both", "only A", "only B", "neither", "McNemar p"]
PAIRED_HEADER += ["B − A (95% bootstrap)"]


def _paired_cells(
    a: dict[str, bool], b: dict[str, bool], seed: int
) -> tuple[list[str], list[bool], list[bool]]:
    table = pair_table(a, b)
    common = [task for task in a if task in b]
    xs, ys = [a[t] for t in common], [b[t] for t in common]
    low, high = bootstrap_difference(xs, ys, seed=seed)
    difference = (sum(ys) - sum(xs)) / len(common) if common else 0.0
    cells = [str(table.n), str(table.both), str(table.only_a), str(table.only_b)]
    p = mcnemar_exact(table.only_a, table.only_b)
    cells += [str(table.neither), f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"]
    cells.append(f"{100 * difference:+.0f} pts [{100 * low:+.0f}, {100 * high:+.0f}]")
    return cells, xs, ys


def _solved(s: StrategyStats, by_trial: int | None = None) -> dict[str, bool]:
    return {
        task: trial is not None and (by_trial is None or trial <= by_trial)
        for task, trial in s.solved_at.items()
    }


def _share_tasks(a: StrategyStats, b: StrategyStats) -> bool:
    """A pair with no task finished by both has nothing to compare (a run stopped early)."""
    return any(task in b.solved_at for task in a.solved_at)


def paired_rows(stats: RunStats) -> tuple[list[str], list[list[str]]]:
    """Every pair of strategies that finished a task in common, task by task (the bootstrap
    seeded by the run's seed)."""
    seed = int(stats.manifest.get("seed") or 0)
    header = PAIRED_HEADER + ["tokens per extra success (B over A)"]
    rows = []
    for i, a in enumerate(stats.strategies):
        for b in stats.strategies[i + 1 :]:
            if not _share_tasks(a, b):
                continue
            cells, xs, ys = _paired_cells(_solved(a), _solved(b), seed)
            extra = tokens_per_extra_success(
                a.prompt_tokens + a.completion_tokens,
                b.prompt_tokens + b.completion_tokens,
                sum(xs),
                sum(ys),
            )
            spent = (
                "-" if extra is None else f"{extra:,.0f}" + (" (B spent less)" if extra < 0 else "")
            )
            rows.append([a.label, b.label, *cells, spent])
    return header, rows


def first_trial_rows(stats: RunStats) -> tuple[list[str], list[list[str]]]:
    """Trial 1 without memory against trial 1 with it: where retrieved lessons hurt or help."""
    seed = int(stats.manifest.get("seed") or 0)
    memory = [s for s in stats.strategies if s.strategy == "reflexion-memory"]
    plain = next((s for s in stats.strategies if s.strategy != "reflexion-memory"), None)
    rows = []
    for b in memory if plain else []:
        assert plain is not None
        if not _share_tasks(plain, b):
            continue
        cells, _, _ = _paired_cells(_solved(plain, 1), _solved(b, 1), seed)
        rows.append([f"{plain.label}, trial 1", f"{b.label}, trial 1", *cells])
    return PAIRED_HEADER, rows


def later_trial_rows(stats: RunStats) -> tuple[list[str], list[list[str]]]:
    """Only when some strategy made a trial after the first."""
    header = ["strategy", "trial 1 failed", "rescued later", "later trials", "repeated answer"]
    if not any(s.later_trials for s in stats.strategies):
        return header, []
    rows = [
        [
            s.label,
            str(s.failed_first),
            _pct(s.rescued, s.failed_first),
            str(s.later_trials),
            _pct(s.repeated_answers, s.later_trials),
        ]
        for s in stats.strategies
    ]
    return header, rows


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _manifest_lines(stats: RunStats) -> list[str]:
    m = stats.manifest
    when = f"started {_when(stats.started_at)}, ended {_when(stats.ended_at)}"
    lines = [f"- run: `{stats.run_id}`, {stats.status}; {when}"]
    for key in sorted(m):
        if key in ("task_order", "prompt_hashes", "versions"):
            continue
        lines.append(f"- {key}: `{json.dumps(m[key], sort_keys=True)}`")
    lines.append(f"- task order (seed {m.get('seed')}): {', '.join(m.get('task_order', []))}")
    lines.append(
        f"- prompt files (sha256): `{json.dumps(m.get('prompt_hashes', {}), sort_keys=True)}`"
    )
    lines.append(f"- versions: `{json.dumps(m.get('versions', {}), sort_keys=True)}`")
    return lines


def rebuild_command(run_id: str, log_path: Path, out: Path) -> str:
    """The `mulligan report` command that rebuilds this report, working as printed."""
    return shlex.join(
        ["mulligan", "report", run_id, "--memory", str(log_path.parent), "--out", str(out)]
    )


def unmetered_note(stats: RunStats) -> str:
    """Said only when some call's usage was never reported: the figures then undercount."""
    counts = [(s.label, s.unmetered_calls) for s in stats.strategies if s.unmetered_calls]
    if not counts:
        return ""
    total = sum(n for _, n in counts)
    split = ", ".join(f"{label} {n}" for label, n in counts)
    return (
        f"{total} model call{'s' if total != 1 else ''} ({split}) timed out after being sent: "
        "the endpoint reported no usage for them, so their tokens and cost are not in these "
        "figures, which are lower than what the endpoint spent."
    )


def markdown(stats: RunStats, generated_at: float, rebuild: str | None = None) -> str:
    parts = [f"# {title(stats)}", ""]
    if stats.manifest.get("scripted"):
        parts += [
            "> **The model in this run is scripted, not a language model.** It answers "
            "correctly only in the ways its script allows; the numbers show that mulligan's "
            "strategies, evaluation and report work, not how any model performs.",
            "",
        ]
    parts += [
        "## Success and cost per strategy",
        "",
        "Solved by trial t is cumulative: tasks whose checks passed at or before trial t. "
        "Brackets are Wilson 95% intervals; n is the number of tasks.",
        "",
        _markdown_table(*summary_rows(stats)),
        "",
        "Tokens and cost count every model call an episode caused: the actor's turns, "
        "context compression (summariser), reflections and insights (reflector) and "
        "llm_judge checks (judge). By role:",
        "",
        _markdown_table(*role_rows(stats)),
        "",
        *([unmetered_note(stats), ""] if unmetered_note(stats) else []),
        "![success by trial](success_by_trial.svg)",
        "",
        "![tokens per success](tokens_per_success.svg)",
        "",
    ]
    pairs = paired_rows(stats)
    if pairs[1]:
        parts += ["## Paired comparison", "", PAIRED_NOTE, "", _markdown_table(*pairs), ""]
    later = later_trial_rows(stats)
    if later[1]:
        parts += ["## After a failed first trial", "", LATER_NOTE, ""]
        parts += [_markdown_table(*later), ""]
    first = first_trial_rows(stats)
    if first[1]:
        parts += ["## Trial 1 with and without memory", "", FIRST_NOTE, ""]
        parts += [_markdown_table(*first), ""]
    lessons = lesson_rows(stats)
    if lessons[1]:
        parts += ["## Lessons", "", _markdown_table(*lessons), ""]
    parts += ["## Per task", "", _markdown_table(*task_rows(stats)), ""]
    parts += ["## Manifest", "", *_manifest_lines(stats), ""]
    command = rebuild or f"mulligan report {stats.run_id}"
    parts += [f"{GENERATED}{_when(generated_at)} by `{command}`.", ""]
    return "\n".join(parts)


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: left; }
th { background: #f3f3f3; }
.scripted { background: #fff3cd; border: 1px solid #e0c060; padding: 0.8rem; }
img { max-width: 48%; margin-right: 1%; border: 1px solid #ddd; }
code { font-size: 0.85rem; }
"""


def html_page(stats: RunStats, generated_at: float) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title(stats))}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title(stats))}</h1>",
    ]
    if stats.manifest.get("scripted"):
        parts.append(
            "<p class='scripted'><strong>The model in this run is scripted, not a language "
            "model.</strong> The numbers show that the strategies, evaluation and report work, "
            "not how any model performs.</p>"
        )
    parts += [
        "<h2>Success and cost per strategy</h2>",
        "<p>Solved by trial t is cumulative; brackets are Wilson 95% intervals; "
        "n is the number of tasks.</p>",
        _html_table(*summary_rows(stats)),
        "<p>Tokens and cost count every model call an episode caused; by role:</p>",
        _html_table(*role_rows(stats)),
        *([f"<p>{html.escape(unmetered_note(stats))}</p>"] if unmetered_note(stats) else []),
        "<p><img src='success_by_trial.svg' alt='success by trial'>"
        "<img src='tokens_per_success.svg' alt='tokens per success'></p>",
    ]
    pairs = paired_rows(stats)
    if pairs[1]:
        parts += ["<h2>Paired comparison</h2>", f"<p>{html.escape(PAIRED_NOTE)}</p>"]
        parts.append(_html_table(*pairs))
    later = later_trial_rows(stats)
    if later[1]:
        parts += ["<h2>After a failed first trial</h2>", f"<p>{html.escape(LATER_NOTE)}</p>"]
        parts.append(_html_table(*later))
    first = first_trial_rows(stats)
    if first[1]:
        parts += ["<h2>Trial 1 with and without memory</h2>", f"<p>{html.escape(FIRST_NOTE)}</p>"]
        parts.append(_html_table(*first))
    lessons = lesson_rows(stats)
    if lessons[1]:
        parts += ["<h2>Lessons</h2>", _html_table(*lessons)]
    parts += ["<h2>Per task</h2>", _html_table(*task_rows(stats)), "<h2>Manifest</h2><ul>"]
    for line in _manifest_lines(stats):
        escaped = html.escape(line[2:])
        parts.append("<li>" + re.sub(r"`([^`]*)`", r"<code>\1</code>", escaped) + "</li>")
    parts += ["</ul>", f"<p>{GENERATED}{_when(generated_at)}.</p></body></html>"]
    return "\n".join(parts)


def write_report(log: EpisodeLog, run_id: str, out: Path) -> RunStats:
    """Write report.md, report.html and the plots into `out`; returns the numbers."""
    stats = collect(log, run_id)
    out.mkdir(parents=True, exist_ok=True)
    suffix = " (scripted model)" if stats.manifest.get("scripted") else ""
    plots.success_by_trial(stats, out / "success_by_trial.svg", suffix)
    plots.tokens_per_success(stats, out / "tokens_per_success.svg", suffix)
    now = time.time()
    rebuild = rebuild_command(run_id, log.path, out)
    (out / "report.md").write_text(markdown(stats, now, rebuild))
    (out / "report.html").write_text(html_page(stats, now))
    return stats


__all__ = ["StrategyStats", "write_report"]
