"""The viewer's pages as HTML text: the runs, a run's task grid, an episode and a lesson.

Each builder reads the memory through `MemoryReader`, shapes plain values for its
template (templates/, Jinja2 with autoescape on, so text from the log is always text), and
takes its links from a `Links` (the server's paths or a bundle's file names). An episode's
page shows each attempt's timeline, what its checks said (the visible ones as the agent saw
them, the hidden ones marked as never shown), the diff of its answer against the attempt
before, and the lessons in play.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jinja2

from mulligan.errors import UserError
from mulligan.memory import assignment
from mulligan.memory.reading import MemoryReader, RunRow
from mulligan.memory.validity import evidence_phrase, online_phrase
from mulligan.report import frontier, plots, repeats, tables
from mulligan.report.cells import OUTCOMES, Grid, build_grid, episode_ids
from mulligan.report.stats import RunStats, collect, same_answer
from mulligan.runs.lifecycle import configured
from mulligan.schema import Attempt, Episode, Lesson, Step, Verdict
from mulligan.view.links import Links

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"


ENVIRONMENT = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render(template: str, links: Links, **values: Any) -> str:
    return ENVIRONMENT.get_template(template).render(links=links, **values)


def run_summary(row: RunRow) -> dict[str, Any]:
    """What the list of runs says about a run, from its manifest."""
    m = row.manifest
    strategies = m.get("strategies") or ([m["strategy"]] if m.get("strategy") else [])
    return {
        "id": row.id,
        "command": m.get("command") or "-",
        "suite": m.get("suite") or m.get("directory") or "-",
        "task": m.get("task") or "",
        "strategies": ", ".join(strategies) or "-",
        "stop": configured(m, "loop", "stop", "oracle"),
        "trials": configured(m, "loop", "trials", "-"),
        "model": configured(m, "endpoint", "model") or "-",
        "started": row.started_at,
        "ended": row.ended_at,
        "status": row.status,
        "episodes": row.episodes,
    }


def runs_page(reader: MemoryReader, links: Links, only: list[str] | None = None) -> str:
    runs = [run_summary(r) for r in reader.runs() if only is None or r.id in only]
    return render("runs.html", links, title="Runs", runs=runs, where=str(reader.directory))


def run_grid(reader: MemoryReader, run_id: str) -> tuple[RunStats, Grid]:
    """The report's numbers for the run and its task grid against the run's first strategy."""
    reader.run(run_id)  # an unknown run is refused in the viewer's words
    stats = collect(reader.log, run_id)
    return stats, build_grid(stats, episode_ids(reader.log.episodes(run_id)))


def run_page(
    reader: MemoryReader,
    links: Links,
    run_id: str,
    outcome: str = "",
    strategy: str = "",
    made: tuple[RunStats, Grid] | None = None,
) -> str:
    """The task grid, narrowed to `outcome` and `strategy` (a strategy's label) if given."""
    stats, grid = made or run_grid(reader, run_id)
    if outcome and outcome not in OUTCOMES:
        raise UserError(f"outcome {outcome!r}: use one of {', '.join(OUTCOMES)}")
    if strategy and strategy not in grid.labels:
        raise UserError(f"strategy {strategy!r}: this run has {', '.join(grid.labels)}")
    shown = grid.filtered(outcome, strategy)
    return render(
        "run.html",
        links,
        title=f"Run {run_id}",
        run=run_summary(reader.run(run_id)),
        setting=tables.setting_lines(stats),
        grid=shown,
        counts=grid.counts(),
        all_labels=grid.labels,
        outcomes=OUTCOMES,
        outcome=outcome,
        strategy=strategy,
        total=len(grid.rows),
        repeats=repeats.repeat_rows(stats) if stats.repeats > 1 else None,
        frontier=frontier.frontier_lines(stats),
        plots=[plots.frontier_svg(stats, cost) for cost in frontier.drawn(stats)],  # made here
        episodes={
            (task, label): cell.episode_id
            for task, cells in grid.rows
            for label, cell in cells.items()
        },  # fmt: skip
    )


def diff_lines(lines: Iterable[str]) -> list[tuple[str, str]]:
    """A unified diff's lines as (kind, line), kind file, add, remove, hunk or same."""
    kinds = {"+": "add", "-": "remove", "@": "hunk"}
    return [
        ("file" if line.startswith(("+++", "---")) else kinds.get(line[:1], "same"), line)
        for line in lines
    ]


def calls(step: Step) -> list[dict[str, Any]]:
    """The step's tool calls, each with its result (then any result no call asked for)."""
    results = {r.call_id: r for r in step.results}
    made = [(c.name, c.arguments, c.id, results.pop(c.id, None)) for c in step.tool_calls]
    made += [(orphan.name, "", orphan.call_id, orphan) for orphan in results.values()]
    return [
        {"name": name, "arguments": arguments, "id": call_id,
         "status": result.status if result else "no result",
         "output": result.output if result else "",
         "seconds": f"{result.seconds:.2f}" if result else "-",
         "lines": len(result.output.splitlines()) if result else 0}
        for name, arguments, call_id, result in made
    ]  # fmt: skip


def drawn_text(attempt: Attempt) -> str:
    """How its strategy drew it, where that differs from the run's own way: "temperature 0.6,
    prompt approach_plan"; empty for the others."""
    parts = (
        [] if attempt.drawn_temperature is None else [f"temperature {attempt.drawn_temperature:g}"]
    )
    return ", ".join(parts + ([f"prompt {attempt.approach}"] if attempt.approach else []))


def attempts(
    episode: Episode, lessons: dict[str, Lesson], assigned: dict[int, assignment.Assignment]
) -> list[dict[str, Any]]:
    """Each attempt and its verdict, with what its page shows beside them: the diff of its
    answer against the attempt before, the lessons shown, and the candidate verification
    while working assigned to it (`assigned`, by trial: shown, or withheld)."""
    found = []
    for n, attempt in enumerate(episode.attempts):
        diff = None
        if n:
            before = episode.attempts[n - 1]
            names = (f"trial {before.trial}", f"trial {attempt.trial}")
            old, new = (before.answer or "").splitlines(), (attempt.answer or "").splitlines()
            lines = diff_lines(difflib.unified_diff(old, new, *names, lineterm=""))
            diff = {"repeated": same_answer(before.answer, attempt.answer), "lines": lines}
        ids = attempt.lesson_ids
        found.append(
            {
                "attempt": attempt,
                "verdict": episode.verdicts[n] if n < len(episode.verdicts) else None,
                "drawn": drawn_text(attempt),
                "diff": diff,
                "changes": diff_lines(attempt.changes.splitlines()) if attempt.changes else [],
                "shown": [lessons[i] for i in ids if i in lessons],
                "shown_missing": [i for i in ids if i not in lessons],
                "assigned": assigned.get(attempt.trial),
            }
        )
    return found


def selection_view(episode: Episode, submitted: int | None) -> dict[str, Any] | None:
    """How a selection strategy chose (None for an episode that did not select): each
    cluster of candidates with what it passed and its score, in the order the rule ranked
    them (a full visible pass first), the one holding the `submitted` trial marked. Only the
    evidence the selection saw: nothing hidden."""
    chosen = episode.selection
    if chosen is None or submitted is None:
        return None
    rows = []
    for n, trials in enumerate(chosen.clusters):
        given = chosen.given[n] if n < len(chosen.given) else None
        score = f"{chosen.scores[n]:g}" if n < len(chosen.scores) else "-"
        rows.append({"trials": trials, "submitted": submitted in trials, "given": given,
                     "score": score})  # fmt: skip
    return {"rule": chosen.rule, "clusters": rows,
            "crashed": chosen.crashed, "probes": chosen.probes,
            "separation": chosen.separation, "drawn": len(episode.attempts)}  # fmt: skip


def after(verdict: Verdict | None) -> str:
    """What the attempt a lesson's event concerns scored ("-" when none was logged)."""
    if verdict is None:
        return "-"
    seen = verdict.visible_passed
    return ("passed" if verdict.passed else "failed") + (
        "" if seen is None else f" (visible checks {'passed' if seen else 'failed'})"
    )


ENVIRONMENT.filters.update(
    when=tables.moment,
    calls=calls,
    after=after,
    online=online_phrase,
    verified=evidence_phrase,
)


def episode_page(reader: MemoryReader, links: Links, episode_id: str) -> str:
    episode = reader.log.episode(episode_id)
    if episode is None:
        raise UserError(f"no episode {episode_id!r} in {reader.directory}")
    shown = [i for a in episode.attempts for i in a.lesson_ids]
    lessons = {lesson.id: lesson for lesson in reader.log.lessons(shown + episode.lessons_written)}
    stored = reader.log.stored_ids(list(lessons))
    assigned = reader.log.assignments_of_episode(episode.id)
    submitted = episode.attempts[episode.submitted].trial if episode.attempts else None
    return render(
        "episode.html",
        links,
        title=f"Episode {episode.task_id} · {episode.strategy}",
        episode=episode,
        attempts=attempts(episode, lessons, assigned),
        selection=selection_view(episode, submitted),
        submitted=submitted,
        stored=stored,
        written=[lessons[i] for i in episode.lessons_written if i in lessons],
    )


def lesson_page(reader: MemoryReader, links: Links, lesson_id: str) -> str:
    lesson = reader.lesson(lesson_id)
    if lesson is None:
        raise UserError(f"no lesson {lesson_id!r} in {reader.directory}")
    stored = lesson_id in reader.log.stored_ids([lesson_id])
    assigned = reader.log.assignments_of_lesson(lesson_id)
    return render(
        "lesson.html",
        links,
        title=f"Lesson {lesson_id}",
        record=lesson,
        stored=stored,
        uses=reader.lesson_uses(lesson_id),
        assigned=assigned,
        assigned_summary=assignment.summary(assigned),
    )


def stylesheet() -> str:
    return (STATIC / "view.css").read_text(encoding="utf-8")
