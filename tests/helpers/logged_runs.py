"""Runs the tests log by hand: each strategy's attempts on each task and their verdicts."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mulligan.memory.log import EpisodeLog
from mulligan.runs.runner import episode_id
from mulligan.schema import Attempt, Episode, Verdict

Made = Mapping[str, Mapping[str, Sequence[Verdict]]]  # strategy: task: each attempt's verdict


def plain_attempt(trial: int, last: bool) -> Attempt:
    return Attempt(task_id="", trial=trial)


def log_run(
    log: EpisodeLog,
    run_id: str,
    config: dict[str, Any],
    made: Made,
    attempt: Callable[[int, bool], Attempt] = plain_attempt,
) -> None:
    """Log a finished run as the loop would: `attempt(trial, last)` makes each attempt."""
    log_repeats(log, run_id, config, {1: made}, attempt)


def log_repeats(
    log: EpisodeLog,
    run_id: str,
    config: dict[str, Any],
    repeats: Mapping[int, Made],
    attempt: Callable[[int, bool], Attempt] = plain_attempt,
) -> None:
    """`log_run` of a study repeated: each repeat's episodes under their own ids."""
    log.start_run(run_id, config)
    for repeat, made in repeats.items():
        log_episodes(log, run_id, made, attempt, repeat)
    log.end_run(run_id)


def log_episodes(
    log: EpisodeLog,
    run_id: str,
    made: Made,
    attempt: Callable[[int, bool], Attempt],
    repeat: int = 1,
) -> None:
    for strategy, tasks in made.items():
        for position, (task_id, verdicts) in enumerate(tasks.items()):
            episode = Episode(
                id=episode_id(run_id, strategy, task_id, repeat=repeat), run_id=run_id,
                task_id=task_id, strategy=strategy,
            )  # fmt: skip
            log.start_episode(episode, position)
            for trial, verdict in enumerate(verdicts, 1):
                tried = attempt(trial, trial == len(verdicts))
                tried.task_id = task_id
                episode.attempts.append(tried)
                episode.verdicts.append(verdict)
                log.log_attempt(episode, tried, verdict)
            episode.passed = episode.verdicts[-1].passed
            log.end_episode(episode)


def garbage_pages(log: Path, tables: Sequence[str]) -> None:
    """The first page of each table in the SQLite file `log` written over with garbage; the
    file's header and the rest stay whole, so it still opens (every commit checkpointed into
    it first, so that none is read from the -wal file instead)."""
    with sqlite3.connect(log) as db:
        db.execute("pragma wal_checkpoint(truncate)")
        size = db.execute("pragma page_size").fetchone()[0]
        marks = ",".join("?" for _ in tables)
        query = f"select rootpage from sqlite_master where name in ({marks})"
        pages = [page for (page,) in db.execute(query, list(tables))]
    db.close()
    with log.open("r+b") as file:
        for page in pages:
            file.seek((page - 1) * size)
            file.write(b"\xff" * size)
