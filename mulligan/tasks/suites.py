"""Resolve a suite name or a path to tasks, and pick subsets."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mulligan.actor.tools import Tool
from mulligan.data import cached as fetched_file
from mulligan.errors import UserError
from mulligan.sandbox import Policy
from mulligan.schema import Task
from mulligan.tasks.examples import EXAMPLE_TOOLS, TASKS
from mulligan.tasks.files import load_task_path
from mulligan.tasks.hotpotqa import hotpotqa_tasks
from mulligan.tasks.humaneval import humaneval_path, humaneval_tasks
from mulligan.tasks.mbpp import mbpp_tasks

SUITES = ("humaneval", "mbpp", "hotpotqa", "examples")
DEFAULT_DATA = {
    "mbpp": ["mbpp-py.jsonl", "../shared/datasets/mbpp-py.jsonl"],
    "hotpotqa": [
        "hotpot_dev_distractor_sample100.json",
        "../shared/datasets/hotpot_dev_distractor_sample100.json",
    ],
}


@dataclass
class Suite:
    name: str
    tasks: list[Task]
    tools: list[Tool] = field(default_factory=list)
    """Tools beyond the built-ins that these tasks name."""
    answers: list[Path] = field(default_factory=list)
    """The files holding the tasks' answers: a run's box hides them (`hidden`)."""

    def hidden(self, policy: Policy | None = None) -> Policy:
        """`policy` (or none) with the suite's answer files covered too."""
        return (policy or Policy()).hiding(*self.answers)


def _data_path(suite: str, data: str | None) -> Path:
    if data:
        return Path(data)
    for candidate in DEFAULT_DATA[suite]:
        if Path(candidate).exists():
            return Path(candidate)
    fetched = fetched_file(suite)
    if fetched:
        return fetched
    raise UserError(
        f"{suite} needs its data file: pass --data PATH, or run `mulligan data fetch {suite}` "
        "once (see docs/tasks.md)"
    )


def load_suite(
    name: str, *, data: str | None = None, feedback: Literal["em", "hidden"] = "em"
) -> Suite:
    """The suite's tasks; the files holding their answers are hidden from the box."""
    if name == "humaneval":
        path = Path(data) if data else humaneval_path()
        return Suite(name, humaneval_tasks(path), answers=[path.parent if not data else path])
    if name == "mbpp":
        path = _data_path(name, data)
        return Suite(name, mbpp_tasks(path), answers=[path])
    if name == "hotpotqa":
        path = _data_path(name, data)
        return Suite(name, hotpotqa_tasks(path, feedback), answers=[path])
    if name == "examples":
        return Suite(name, list(TASKS), list(EXAMPLE_TOOLS))
    path = Path(name)
    if not path.exists():
        raise UserError(f"{name}: not a suite ({', '.join(SUITES)}) nor an existing file")
    return Suite(path.stem, load_task_path(path), answers=[path])


def select(
    tasks: list[Task],
    *,
    ids: list[str] | None = None,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> list[Task]:
    """--ids picks by id (in order given), --sample a seeded random subset, --limit the first N."""
    if ids:
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise UserError(
                f"--ids: {', '.join(map(repr, repeated))} given twice; name each task once"
            )
        by_id = {t.id: t for t in tasks}
        missing = [i for i in ids if i not in by_id]
        if missing:
            known = ", ".join(list(by_id)[:5]) + (", ..." if len(by_id) > 5 else "")
            raise UserError(
                f"--ids: unknown task id(s) {', '.join(missing)}; this suite has {known} "
                "(list them with `mulligan tasks`)"
            )
        tasks = [by_id[i] for i in ids]
    if sample is not None:
        if sample > len(tasks):
            raise UserError(
                f"--sample {sample}: larger than the {len(tasks)} tasks selected; "
                f"pass --sample {len(tasks)} or fewer"
            )
        tasks = random.Random(seed).sample(tasks, sample)
    if limit is not None:
        tasks = tasks[:limit]
    return tasks
