"""A run's record, written once for `run`, `bench` and `solve`: its id, its manifest (what the
run is: the command's selection and the run configuration's dump) and the resume check
against the manifest it started with, field by field. The run's start and end are the
command pipeline's (mulligan/cli/pipeline.py) through `lifecycle`, as is a transfer study's
learning phase."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mulligan import prompts
from mulligan.errors import EndpointUnreachable, UserError
from mulligan.memory.log import EpisodeLog, run_owner
from mulligan.sandbox.processes import working
from mulligan.schema import Task
from mulligan.settings.fields import flag_of
from mulligan.settings.run_config import RunConfig

RESUME_MAY_CHANGE = {
    "endpoint.base_url": "where the model is reached (a server restarted on another port "
    "serves the same model)",
    "endpoint.api_key": "the key the endpoint is reached with (never written down)",
    "endpoint.timeout": "how long a reply is waited for",
    "reflector.base_url": "where the feedback model is reached",
    "reflector.api_key": "the key the feedback model is reached with (never written down)",
    "escalation.base_url": "where the stronger model is reached",
    "escalation.api_key": "the key the stronger model is reached with (never written down)",
    "run.memory": "where the memory is (the run is looked up there)",
    "run.concurrency": "how many tasks run at once",
    "local.slots": "how many requests the local model's server answers at once",
    "local.threads": "how many CPU threads the local model's server computes with",
}
"""Settings a resumed run may change, because they cannot change a result: why, for each."""


RECORDED_LATER = ("task_digests",)
"""Manifest fields a run logged before they were recorded lacks: compared when it has them."""
NOT_COMPARED = (
    "prompt_hashes", "versions", "concurrency", "endpoint", "local_slots",
    *(f"config.{path}" for path in RESUME_MAY_CHANGE),
)  # fmt: skip
"""What a resume may change: the settings that cannot change a result (RESUME_MAY_CHANGE in
run_config), the software's version, and, in manifests written before the run
configuration held them, the address the model was reached at and the concurrency."""
FLAGS = {
    "suite": "the suite or task file",
    "tasks": "the task selection (--ids, --limit, --sample)",
    "task_order": "the task selection (--ids, --limit, --sample, --seed)",
    "strategies": "--strategy/--strategies",
    "directory": "--dir",
    "checks": "--check",
    "learn_tasks": "--learn-on",
    "first_attempt_run": "--first-from",
    "draws_from": "--draws-from",
    "first_attempt_from": "--strategies (the first of them that can share trial 1 makes it)",
}
"""How to set a manifest field that is not in the run configuration (default: `--field`)."""
NOT_RECORDED = {
    "resume": "names the run to continue",
    "verbose": "how much is logged",
    "json": "the output format",
    "out": "where the report goes (bench; its memory by default: pass --memory to move it)",
    "apply": "whether solve applies the passing diff after the run",
    "executor": "where episodes run (threads or Ray): the same episodes either way",
    "ray_address": "which Ray cluster",
}
"""Flags of run, bench and solve that a manifest does not hold, because they cannot change
a result: argparse dest -> why. Every other flag is compared on --resume."""
LEGACY = {
    "trials": "loop", "stop": "loop", "carry": "loop", "carried_reflections": "loop",
    "min_similarity": "loop", "self_tests": "loop", "protocol": "actor",
    "budget": None, "compression": None, "model": "endpoint", "temperature": "endpoint",
}  # fmt: skip
"""Where a manifest written before the run configuration kept its settings: key -> section
(None: the key is the section)."""


BEFORE_IT_EXISTED: dict[tuple[str, str], Callable[[dict[str, Any]], Any]] = {
    # without self-tests the task's own checks are all there is: either value reads the same
    ("loop", "own_checks_first"): lambda config: not config.get("loop", {}).get("self_tests"),
}
"""Settings whose default changed what a run does when they came: the value that stood for
each before (from the run's other settings), so that a run logged earlier is read, and
resumed, as it ran."""


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


def task_digests(tasks: list[Task]) -> dict[str, str]:
    """Each task's content (prompt, checks, files, budget) as a short digest, by id: a resume
    after a task file was edited is refused, not scored half with the old checks."""
    return {t.id: hashlib.sha256(t.model_dump_json().encode()).hexdigest()[:16] for t in tasks}


def configured(manifest: dict[str, Any], section: str, name: str, default: Any = None) -> Any:
    """One setting of a logged run, from its configuration or, in a manifest written before
    there was one, where it stood then."""
    return upgraded(manifest)["config"].get(section, {}).get(name, default)


def upgraded(before: dict[str, Any]) -> dict[str, Any]:
    """An old manifest in today's shape: its settings moved into `config`, and a setting
    that came later at the value that stood for it before (`BEFORE_IT_EXISTED`)."""
    config: dict[str, Any] = json.loads(json.dumps(before.get("config", {})))
    rest = {}
    for key, value in before.items():
        if key in LEGACY:
            section = LEGACY[key]
            if section is None:
                config.setdefault(key, value)
            else:
                config.setdefault(section, {}).setdefault(key, value)
        else:
            rest[key] = value
    for (section, name), stood in BEFORE_IT_EXISTED.items():
        config.setdefault(section, {}).setdefault(name, stood(config))
    return {**rest, "config": config}


def first_difference(old: Any, new: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first field (dotted path) whose value differs. Only fields the earlier manifest
    has are compared (a manifest from before a setting existed says nothing about it)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(
            old, key=lambda k: (k != "strategies", k in ("endpoint", *RECORDED_LATER), k)
        ):
            # the cause first: strategies, and the endpoint's temperature (its default
            # follows the strategies and trials) after what it follows from
            if f"{path}{key}" in NOT_COMPARED:
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
    extra = sorted(  # a field the run did not have, set here (unset: as before it existed)
        k for k in set(now) - set(before) - {*NOT_COMPARED, *RECORDED_LATER, "config"} if now[k]
    )
    found = first_difference(before, now)
    if found is None and extra:
        found = (extra[0], None, now[extra[0]])
    if found is None:
        return
    name, old, new = found
    if name.startswith("task_digests."):
        raise UserError(
            f"--resume {run_id}: task {name.removeprefix('task_digests.')!r} changed since the "
            "run started (its prompt, checks or files differ from the run's record); restore "
            "the task file as it was, or start a new run without --resume"
        )
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
def lifecycle(log: EpisodeLog, run_id: str, wanted: dict[str, Any], resume: bool) -> Iterator[None]:
    """Start the run (or check that a resume continues it with the same manifest, and mark it
    running again, this process's), then mark how it ended: the log never keeps a run
    "running" that has stopped (one killed reads interrupted once its process is gone)."""
    if resume:
        run = log.run(run_id)
        check_resume(run, run_id, wanted, log.path)
        owner = run_owner(run) if run else None
        if owner and working(owner):  # two processes on one run: refused
            raise UserError(
                f"--resume {run_id}: the run is still running, in process {owner['pid']}; let "
                "it finish, or stop it, then resume"
            )
        log.resume_run(run_id)
    else:
        log.start_run(run_id, wanted)
    try:
        yield
    except KeyboardInterrupt:
        log.end_run(run_id, "interrupted")
        raise
    except EndpointUnreachable as exc:  # nothing was scored for what the server never answered
        log.end_run(run_id, "failed")
        raise EndpointUnreachable(
            f"{exc}; the run stopped with what it finished kept: once the endpoint answers, "
            f"continue it with --resume {run_id}"
        ) from exc
    except BaseException:
        log.end_run(run_id, "failed")
        raise
    log.end_run(run_id)
