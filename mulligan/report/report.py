"""report.md, report.html and the plots, rebuilt from the episode log alone."""

from __future__ import annotations

import html
import json
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from mulligan.inputs.paths import write_whole
from mulligan.memory.log import EpisodeLog
from mulligan.report import frontier, plots, repeats, transfer_report
from mulligan.report.headline import headline
from mulligan.report.outcomes import write_outcomes
from mulligan.report.repeats import Block, Table
from mulligan.report.selection_report import selection_section
from mulligan.report.self_test_report import self_test_lines, self_test_note, self_test_rows
from mulligan.report.stats import RunStats, StrategyStats, collect
from mulligan.report.tables import (
    FIRST_NOTE,
    LATER_NOTE,
    PAIRED_NOTE,
    SUCCESS_NOTE,
    Piece,
    blocks,
    cost_note,
    cost_rows,
    first_trial_rows,
    images,
    inline,
    later_trial_rows,
    lesson_rows,
    model_rows,
    moment,
    paired_rows,
    role_cost_rows,
    role_rows,
    section,
    setting_lines,
    success_rows,
    task_rows,
)
from mulligan.report.transfer_report import TransferStats, transfer_stats

GENERATED = "Generated at "


def title(stats: RunStats) -> str:
    label = stats.manifest.get("label")
    base = f"mulligan study {stats.run_id}"
    return f"{base}: {label}" if label else base


def _manifest_lines(stats: RunStats) -> list[str]:
    m = stats.manifest
    when = f"started {moment(stats.started_at)}, ended {moment(stats.ended_at)}"
    lines = [f"- run: `{stats.run_id}`, {stats.status}; {when}"]
    for key in sorted(m):
        if key in ("task_order", "prompt_hashes", "versions"):
            continue
        if key == "config":  # the run configuration, a line per section
            for section, values in sorted(m[key].items()):
                lines.append(f"- {key}.{section}: `{json.dumps(values, sort_keys=True)}`")
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


def _per_strategy(stats: RunStats, count: Callable[[StrategyStats], int]) -> tuple[int, str]:
    """A count over the run, and how it splits by strategy ("reflexion 2, retry 1")."""
    counts = [(s.label, count(s)) for s in stats.strategies if count(s)]
    return sum(n for _, n in counts), ", ".join(f"{label} {n}" for label, n in counts)


def unmetered_note(stats: RunStats) -> str:
    """Said only when some call's usage was never reported: the figures then undercount."""
    total, split = _per_strategy(stats, lambda s: s.unmetered_calls)
    if not total:
        return ""
    return (
        f"{total} model call{'s' if total != 1 else ''} ({split}) timed out after being sent: "
        "the endpoint reported no usage for them, so their tokens and cost are not in these "
        "figures, which are lower than what the endpoint spent."
    )


def hidden_unrun_note(stats: RunStats) -> str:
    """Said only when a hidden check could not start: those scores say nothing of the model."""
    total, split = _per_strategy(stats, lambda s: s.hidden_unrun)
    if not total:
        return ""
    return (
        f"In {total} attempt{'s' if total != 1 else ''} ({split}) a hidden check could not "
        "start (a broken check or environment, not the model): each counts as failed in these "
        "scores, and the agent was not told (`mulligan episodes show` names the check)."
    )


def slots_note(stats: RunStats) -> str:
    """Said only when the run's llama.cpp server answered several requests at once."""
    slots = stats.manifest.get("local_slots")
    if not isinstance(slots, int) or slots < 2:
        return ""
    return (
        f"The model's llama.cpp server answered up to {slots} requests at once (slots). "
        "llama.cpp does not promise that a request batched with others is answered bit for "
        "bit as it would be alone, even with the seed each request was sent with, so a rerun "
        "of this study may differ by more than its sampling (benchmarks/determinism.py "
        "counts how often on a given server)."
    )


def notes(stats: RunStats) -> list[str]:
    """What the figures cannot show by themselves, one paragraph each."""
    found = (unmetered_note(stats), hidden_unrun_note(stats), slots_note(stats))
    return [note for note in found if note]


def _sections(stats: RunStats) -> list[tuple[str, list[Block]]]:
    """The tables after the costs, each after what explains it (a section without rows is
    empty); the selection's section goes before the last, the lessons."""
    found: list[tuple[str, list[Block], Table]] = [
        ("Paired comparison", [PAIRED_NOTE], paired_rows(stats)),
        ("After a failed first trial", [LATER_NOTE], later_trial_rows(stats)),
        ("Trial 1 with and without memory", [FIRST_NOTE], first_trial_rows(stats)),
        ("Self-tests", [self_test_note(stats), *self_test_lines(stats)], self_test_rows(stats)),
        ("Lessons", [], lesson_rows(stats)),
    ]
    return [(title, [*said, table] if table[1] else []) for title, said, table in found]


SCRIPTED: Piece = (
    [
        "> **The model in this run is scripted, not a language model.** It answers "
        "correctly only in the ways its script allows; the numbers show that mulligan's "
        "strategies, evaluation and report work, not how any model performs.",
        "",
    ],
    [
        "<p class='scripted'><strong>The model in this run is scripted, not a language "
        "model.</strong> The numbers show that the strategies, evaluation and report work, "
        "not how any model performs.</p>"
    ],
)
BY_ROLE: Piece = (
    [
        "Tokens and cost count every model call an episode caused: the actor's turns, "
        "context compression (summariser), reflections and insights (reflector) and "
        "llm_judge checks (judge). By role:",
        "",
    ],
    ["<p>Tokens and cost count every model call an episode caused; by role:</p>"],
)
PLOTS = {
    "success_by_trial.svg": "success by trial",
    "tokens_per_success.svg": "tokens per success",
    "success_by_tokens.svg": "success against tokens",
}


def _pieces(stats: RunStats, transfer: TransferStats | None) -> list[Piece]:
    """The report between its title and its last line, in markdown and in HTML (which shows
    the plots beside the success table)."""
    setup, score, compared = headline(stats)
    plots_md, plots_html = images(PLOTS)
    *sections, lessons = _sections(stats)
    manifest, cost = _manifest_lines(stats), cost_note(stats)
    by_model, money = model_rows(stats), role_cost_rows(stats)
    return [
        SCRIPTED if stats.manifest.get("scripted") else ([], []),
        (
            [setup, "", score, "", *(f"- {line}" for line in compared), ""],
            ["<div class='headline'>", f"<p>{inline(setup)}</p>", f"<p>{inline(score)}</p>"]
            + ["<ul>", *(f"<li>{html.escape(line)}</li>" for line in compared), "</ul></div>"],
        ),
        ([*setting_lines(stats), ""], [f"<p>{inline(line)}</p>" for line in setting_lines(stats)]),
        section(transfer_report.title(stats), transfer_report.blocks(stats, transfer)),
        section("Success per strategy", [SUCCESS_NOTE, success_rows(stats)]),
        ([], plots_html),
        section("Repeats", repeats.blocks(stats)),
        section("Cost per strategy", [cost_rows(stats), *([cost] if cost else [])]),
        BY_ROLE,
        blocks([role_rows(stats), *(table for table in (by_model, money) if table[1])]),
        *(([note, ""], [f"<p>{html.escape(note)}</p>"]) for note in notes(stats)),
        (plots_md, []),
        frontier.section(stats),
        *(section(*found) for found in sections),
        selection_section(stats),
        section(*lessons),
        section("Per task", [task_rows(stats)]),
        (
            ["## Manifest", "", *manifest, ""],
            ["<h2>Manifest</h2><ul>", *(f"<li>{inline(line[2:])}</li>" for line in manifest)]
            + ["</ul>"],
        ),
    ]


def markdown(
    stats: RunStats,
    generated_at: float,
    rebuild: str | None = None,
    transfer: TransferStats | None = None,
) -> str:
    command = rebuild or f"mulligan report {stats.run_id}"
    parts = [f"# {title(stats)}", "", *(line for md, _ in _pieces(stats, transfer) for line in md)]
    return "\n".join([*parts, f"{GENERATED}{moment(generated_at)} by `{command}`.", ""])


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem;
  color: #222; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: left; }
th { background: #f3f3f3; }
.scripted { background: #fff3cd; border: 1px solid #e0c060; padding: 0.8rem; }
.headline { background: #eef4fb; border-left: 4px solid #3a6ea5; padding: 0.4rem 1rem; }
.headline ul { margin: 0.3rem 0; padding-left: 1.2rem; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(24rem, 1fr)); gap: 1rem;
  align-items: start; }
.plots img { width: 100%; height: auto; border: 1px solid #ddd; box-sizing: border-box; }
code { font-size: 0.85rem; }
"""


def html_page(stats: RunStats, generated_at: float, transfer: TransferStats | None = None) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title(stats))}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title(stats))}</h1>",
        *(line for _, page in _pieces(stats, transfer) for line in page),
    ]
    return "\n".join([*parts, f"<p>{GENERATED}{moment(generated_at)}.</p></body></html>"])


REPORT_FILES = (
    "report.md", "report.html", "outcomes.jsonl", *PLOTS,
    *(f"frontier_{cost}.svg" for cost in frontier.COSTS),
)  # fmt: skip
"""What `write_report` writes into its directory."""


NAMES_ITS_RUN = re.compile(r"^# mulligan study (\w+)|<title>mulligan study (\w+)", re.M)


def report_in(out: Path) -> tuple[list[str], str | None]:
    """The report files `out` holds, and the run whose report its report.md is (None: there
    is none, or it is not one mulligan wrote)."""
    present = [name for name in REPORT_FILES if (out / name).exists()]
    for name in ("report.md", "report.html"):  # each names its run at the top
        if (out / name).is_file():
            with open(out / name, errors="replace") as report:
                found = NAMES_ITS_RUN.search(report.read(4096))
            if found:
                return present, found.group(1) or found.group(2)
    return present, None


def write_report(log: EpisodeLog, run_id: str, out: Path) -> RunStats:
    """Write report.md, report.html, the plots and each task's outcome (outcomes.jsonl) into
    `out`; returns the numbers."""
    stats = collect(log, run_id)
    out.mkdir(parents=True, exist_ok=True)
    now = time.time()
    rebuild = rebuild_command(run_id, log.path, out)
    transfer = transfer_stats(log, stats)
    # each file whole; report.md first, so that whatever a kill leaves is known as the run's
    write_whole(out / "report.md", markdown(stats, now, rebuild, transfer))
    write_whole(out / "report.html", html_page(stats, now, transfer))
    write_outcomes(stats, out / "outcomes.jsonl")
    suffix = " (scripted model)" if stats.manifest.get("scripted") else ""
    plots.success_by_trial(stats, out / "success_by_trial.svg", suffix)
    plots.tokens_per_success(stats, out / "tokens_per_success.svg", suffix)
    plots.success_by_tokens(stats, out / "success_by_tokens.svg", suffix)
    for cost in frontier.drawn(stats):
        write_whole(out / f"frontier_{cost}.svg", plots.frontier_svg(stats, cost, suffix))
    return stats
