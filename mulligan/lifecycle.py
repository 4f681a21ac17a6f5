"""A run's lifecycle, written once for `run`, `bench` and `solve`: its id, its manifest (what
the run is), the resume check against the manifest it started with, and its end (finished,
interrupted or failed: the log never keeps a run "running" that has stopped)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mulligan.bench.runner import check_resume
from mulligan.memory.log import EpisodeLog


def new_run_id(resume: str | None) -> str:
    return resume or uuid.uuid4().hex[:10]


@contextmanager
def lifecycle(
    log: EpisodeLog, run_id: str, manifest: dict[str, Any], resume: bool, prefix: str = ""
) -> Iterator[None]:
    """Start the run (or check that a resume continues it with the same manifest), then mark
    how it ended."""
    if resume:
        check_resume(log.run(run_id), run_id, manifest, log.path)
    else:
        log.start_run(run_id, manifest)
    try:
        yield
    except KeyboardInterrupt:
        log.end_run(run_id, "interrupted")
        print(f"\n{prefix}interrupted; continue with --resume {run_id}", file=sys.stderr)
        raise
    except BaseException:
        log.end_run(run_id, "failed")
        raise
    log.end_run(run_id)
