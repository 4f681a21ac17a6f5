"""A run's lifecycle, written once for `run`, `bench` and `solve`: its id, its manifest (what
the run is: the command's selection and the run configuration's dump), the resume check
against the manifest it started with, field by field, and its end (finished, interrupted or
failed: the log never keeps a run "running" that has stopped)."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mulligan import prompts
from mulligan.errors import UserError
from mulligan.memory.log import EpisodeLog
from mulligan.run_config import RunConfig, flag_of

NOT_COMPARED = ("prompt_hashes", "versions", "concurrency", "endpoint")
"""What a resume may change: how fast it runs, the software's version, and the address the
model is reached at (a server restarted on another port serves the same `model`)."""
FLAGS = {
    "suite": "the suite or task file",
    "tasks": "the task selection (--ids, --limit, --sample)",
    "task_order": "the task selection (--ids, --limit, --sample, --seed)",
    "strategies": "--strategy/--strategies",
    "first_attempt_from": "--strategies (the first of them that can share trial 1 makes it)",
}
"""How to set a manifest field that is not in the run configuration."""
LEGACY = {
    "trials": "loop", "stop": "loop", "carry": "loop", "carried_reflections": "loop",
    "min_similarity": "loop", "self_tests": "loop", "protocol": "actor",
    "budget": None, "compression": None,
}  # fmt: skip
"""Where a manifest written before the run configuration kept its settings: key -> section
(None: the key is the section)."""


def new_run_id(resume: str | None) -> str:
    return resume or uuid.uuid4().hex[:10]


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in ("mulligan", "openai", "chromadb", "pydantic", "sqlite-utils"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def manifest(config: RunConfig, **fields: Any) -> dict[str, Any]:
    """What the run is: the command's own fields and the run configuration's dump."""
    return {
        **fields,
        "config": config.manifest(),
        "prompt_hashes": prompts.prompt_hashes(),
        "versions": versions(),
    }


def configured(manifest: dict[str, Any], section: str, name: str, default: Any = None) -> Any:
    """One setting of a logged run, from its configuration or, in a manifest written before
    there was one, where it stood then."""
    return upgraded(manifest)["config"].get(section, {}).get(name, default)


def upgraded(before: dict[str, Any]) -> dict[str, Any]:
    """An old manifest in today's shape: its settings moved into `config`."""
    if "config" in before:
        return before
    config: dict[str, Any] = {}
    rest = {}
    for key, value in before.items():
        if key in LEGACY:
            section = LEGACY[key]
            if section is None:
                config[key] = value
            else:
                config.setdefault(section, {})[key] = value
        else:
            rest[key] = value
    return {**rest, "config": config}


def first_difference(old: Any, new: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first field (dotted path) whose value differs. Only fields the earlier manifest
    has are compared (a manifest from before a setting existed says nothing about it)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old, key=lambda k: (k != "strategies", k)):  # the cause first
            if not path and key in NOT_COMPARED:
                continue
            found = first_difference(old[key], new.get(key), f"{path}{key}.")
            if found:
                return found
        return None
    return None if old == new else (path.rstrip("."), old, new)


def check_resume(
    run: dict[str, Any] | None, run_id: str, wanted: dict[str, Any], log: object
) -> None:
    """A resume continues the run its id names, with the same arguments, or not at all."""
    if run is None:
        raise UserError(
            f"--resume {run_id}: no run with this id in {log}; "
            "check the id (`mulligan episodes list` shows runs' episodes) and --memory"
        )
    before = upgraded(json.loads(run["manifest"] or "{}"))
    now = json.loads(json.dumps(wanted, sort_keys=True))
    extra = sorted(set(now) - set(before) - set(NOT_COMPARED) - {"config"})
    found = first_difference(before, now)
    if found is None and extra:  # a field the run did not have at all
        found = (extra[0], None, now[extra[0]])
    if found is None:
        return
    name, old, new = found
    raise UserError(
        f"--resume {run_id}: {name} is {new!r} here but {old!r} in the run's manifest; "
        f"resume with the run's own {_how_to_set(name)}, or start a new run without --resume"
    )


def _how_to_set(name: str) -> str:
    if name.startswith("config."):
        path = name.removeprefix("config.")
        flag = flag_of(path)
        section, _, field = path.partition(".")
        return f"--{flag.replace('_', '-')}" if flag else f"[{section}] {field} in mulligan.toml"
    return FLAGS.get(name, f"--{name.replace('_', '-')}")


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
