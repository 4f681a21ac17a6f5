"""The viewer's pages as HTML text: the runs, a run's task grid, an episode and a lesson.

Each builder reads the memory through `MemoryReader`, shapes plain values for its
template (templates/, Jinja2 with autoescape on, so text from the log is always text), and
takes its links from a `Links` (the server's paths or a bundle's file names).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from mulligan.errors import UserError
from mulligan.memory import assignment
from mulligan.memory.reading import MemoryReader, RunRow
from mulligan.memory.validity import evidence_phrase, online_phrase
from mulligan.report import frontier, plots, repeats, tables
from mulligan.report.cells import OUTCOMES, Grid, build_grid, episode_ids
from mulligan.report.stats import RunStats, collect
from mulligan.runs.lifecycle import configured
from mulligan.view import episode_view
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
ENVIRONMENT.filters.update(
    when=tables.moment,
    calls=episode_view.calls,
    after=episode_view.after,
    online=online_phrase,
    verified=evidence_phrase,
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


def episode_page(reader: MemoryReader, links: Links, episode_id: str) -> str:
    episode = reader.log.episode(episode_id)
    if episode is None:
        raise UserError(f"no episode {episode_id!r} in {reader.directory}")
    shown = [i for a in episode.attempts for i in a.lesson_ids]
    lessons = {lesson.id: lesson for lesson in reader.log.lessons(shown + episode.lessons_written)}
    stored = reader.log.stored_ids(list(lessons))
    assigned = reader.log.assignments_of_episode(episode.id)
    submitted = episode_view.submitted_trial(episode)
    return render(
        "episode.html",
        links,
        title=f"Episode {episode.task_id} · {episode.strategy}",
        episode=episode,
        attempts=episode_view.attempts(episode, lessons, assigned),
        selection=episode_view.selection_view(episode, submitted),
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
