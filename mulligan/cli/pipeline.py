"""The one command pipeline. `run`, `bench` and `solve` state only what differs (their
tasks, strategies, evaluator, what they print) in a `RunRequest`; everything a run needs
besides is done here, once, in this order:

    resolve    the run configuration as the run records it (the default temperature)
    connect    the actor's endpoint (and, where a [reflector] section names one, the
               reflector's: see `connect_models`)
    prices     a cost budget needs a known price
    leftovers  what killed mulligan processes left in TMPDIR, removed (sandbox/marked.py)
    executor   threads here, or a Ray cluster (its workers build their loops with the
               same `loop_for` the threads use)
    memory     the episode log and lesson store the configuration names
    manifest   the configuration's dump plus the command's selection (lifecycle.manifest)
    start/end  the run started, or resumed after the manifest check; marked finished,
               interrupted or failed
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mulligan import strategies as registry
from mulligan.cli.output import REPORTER
from mulligan.defaults import DEFAULT_MEMORY
from mulligan.errors import UserError
from mulligan.inputs.memory_files import is_server, log_directory, memory_directory, memory_to_read
from mulligan.llm.base import ChatModel
from mulligan.llm.connect import local_fields
from mulligan.llm.pricing import require_price_for_cost_budget
from mulligan.loop import Loop
from mulligan.memory import Memory, make_embedder
from mulligan.memory.embeddings import embedding_available
from mulligan.memory.log import EpisodeLog
from mulligan.runs import build
from mulligan.runs.build import ESCALATION_MISSING, loop_for, with_default_temperature
from mulligan.runs.executors import open_executor
from mulligan.runs.lifecycle import lifecycle, manifest, new_run_id
from mulligan.sandbox import Policy
from mulligan.sandbox.marked import remove_abandoned
from mulligan.schema import Task
from mulligan.settings.run_config import RunConfig

if TYPE_CHECKING:
    from mulligan.llm.openai_client import OpenAIChatModel  # openai loads on connect()
    from mulligan.runs.executors import Executor


@dataclass
class RunRequest:
    """What a command states about its run; the pipeline does the rest."""

    command: str
    strategies: list[str]
    selection: dict[str, Any]
    """The command's own manifest fields (its suite, tasks, seed, ...): compared on resume."""
    tasks: list[Task] = field(default_factory=list)
    """The tasks the run may attempt (a task's own cost budget needs a price too)."""
    resume: str | None = None
    memory_default: str = DEFAULT_MEMORY
    executor: str = "threads"
    ray_address: str | None = None
    learns: bool = False
    """The run writes lessons though no strategy of it does (a transfer study's learning)."""

    def uses_store(self) -> bool:
        return self.learns or any(s.uses_store for s in self.may_run())

    def repeats(self, config: RunConfig) -> bool:
        return config.loop.trials > 1 and any(s.repeats for s in self.may_run())

    def may_run(self) -> list[registry.Strategy]:
        return [s for name in self.strategies for s in registry.may_run(name)]


def resolved(config: RunConfig, request: RunRequest) -> RunConfig:
    """The configuration as the run records it: a temperature nobody set is the default for
    this run (several trials of a strategy that repeats, or several repeats of a study, need
    some variety)."""
    repeated = request.repeats(config) or int(request.selection.get("repeats", 1)) > 1
    return with_default_temperature(config, repeated)


def run_manifest(config: RunConfig, request: RunRequest, **more: Any) -> dict[str, Any]:
    """What the run is: `lifecycle.manifest` of the resolved configuration and selection
    (`more`: what is known once the run is open)."""
    own = {"command": request.command, "strategies": request.strategies}
    return manifest(resolved(config, request), **{**own, **request.selection, **more})


def connect_models(config: RunConfig) -> tuple[OpenAIChatModel, ChatModel]:
    """The actor's model and the feedback model (runs/build.py `connect_models`), each
    announcing a local model's preparation on stderr."""
    return build.connect_models(config, REPORTER)


def connect_escalation_model(
    config: RunConfig, request: RunRequest, actor: OpenAIChatModel
) -> ChatModel | None:
    """The stronger model a strategy that escalates hands its later trials to (None, not
    connected, when none does): refused before any work when such a strategy runs without
    one, with no trial left for it, or with the actor's own model (it would be `retry` under
    another name)."""
    escalating = [s for s in request.may_run() if s.escalates]
    if not escalating:
        return None
    if config.escalation.model is None:
        raise UserError(ESCALATION_MISSING.format(strategy=escalating[0].name))
    for strategy in escalating:
        strategy.check_trials(config.loop)
    stronger = build.connect_stronger(config, REPORTER)
    at = (actor.name, actor.base_url)
    if stronger is not None and (stronger.name, getattr(stronger, "base_url", None)) == at:
        raise UserError(
            f"--escalate-to {stronger.name}: the actor's model at the same endpoint, so "
            f"{escalating[0].name!r} would only retry; name a stronger model (or its own "
            "--escalate-base-url)"
        )
    return stronger


@dataclass
class Pipeline:
    """An opened run: its configuration, models, memory, executor and id."""

    config: RunConfig
    request: RunRequest
    model: OpenAIChatModel
    reflector: ChatModel
    memory: Memory
    executor: Executor | None
    run_id: str
    policy: Policy
    connected: dict[str, Any] = field(default_factory=dict)
    escalation: ChatModel | None = None

    def manifest(self) -> dict[str, Any]:
        """The run's manifest, with what connecting found (a local model's facts)."""
        return run_manifest(self.config, self.request, **self.connected)

    def make_loop(self, strategy: str, **more: Any) -> Callable[[], Loop]:
        """A factory of loops for one strategy (threads call it once each; Ray pickles it)."""
        config, model, reflector = self.config, self.model, self.reflector
        memory, run_id, policy, escalation = self.memory, self.run_id, self.policy, self.escalation
        return lambda: loop_for(
            config, model, strategy, memory, run_id, policy=policy, reflector=reflector,
            escalation=escalation, **more,
        )  # fmt: skip

    @contextmanager
    def running(self, wanted: dict[str, Any] | None = None, prefix: str = "") -> Iterator[None]:
        """Start the run (or check that a resume continues it), then mark how it ended."""
        log, resume = self.memory.log, bool(self.request.resume)
        with running(log, self.run_id, wanted or self.manifest(), resume, prefix):
            yield


@contextmanager
def opened(
    config: RunConfig, request: RunRequest, policy: Policy, keep: Sequence[Path] = ()
) -> Iterator[Pipeline]:
    """Connect, check prices, open the executor and the memory; close them at the end.
    `keep`: the user's directories that the removal of leftovers never touches (solve's
    project; the memory, and the working directory, always)."""
    config = resolved(config, request)
    if request.uses_store():
        embedding_available(config.run.embedding)
    model, reflector = connect_models(config)
    escalation = connect_escalation_model(config, request, model)
    if config.endpoint.model != model.name:  # the model the endpoint serves, as recorded
        config = config.updated("endpoint.model", model.name, "the model the endpoint serves")
    given = config.given("budget.max_cost")
    require_price_for_cost_budget(model.name, model.price, given, request.tasks)
    location, default = config.run.memory or request.memory_default, request.memory_default
    log = Path(log_directory(location, default)).expanduser() / "episodes.db"
    if request.resume and not log.exists():  # refused before anything is created
        raise UserError(
            f"--resume {request.resume}: no episode log at {log}; "
            "pass the --memory (bench: --out) the run used"
        )
    remove_leftovers([*keep, log.parent])
    executor = open_executor(
        request.executor, request.ray_address, concurrency=config.run.concurrency,
        memory_location=location,
        uses_store=request.uses_store(),
    )  # fmt: skip
    try:
        memory = open_memory(config, model, default=request.memory_default)
        if request.uses_store() and executor is None:  # on Ray, the workers open it
            memory.store  # noqa: B018  a missing embedding model stops the run before any task
        yield Pipeline(
            config, request, model, reflector, memory, executor,
            new_run_id(request.resume), policy.hiding(memory.directory), local_fields(model),
            escalation,
        )  # fmt: skip
    finally:
        if executor:
            executor.close()


def remove_leftovers(keep: Sequence[Path]) -> None:
    """The directories that killed mulligan processes left in TMPDIR removed, and said so."""
    removed = remove_abandoned(keep)
    if removed:
        what = "directories" if len(removed) > 1 else "directory"
        print(
            f"removed {len(removed)} {what} that killed mulligan processes left in "
            f"{removed[0].parent}",
            file=sys.stderr,
        )


@contextmanager
def running(
    log: EpisodeLog,
    run_id: str,
    wanted: dict[str, Any],
    resume: bool,
    prefix: str = "",
    *,
    resumable: bool = True,
) -> Iterator[None]:
    """`lifecycle.lifecycle`, telling how to continue a run that was interrupted (a command
    with no --resume, not `resumable`, says only that it was)."""
    try:
        with lifecycle(log, run_id, wanted, resume):
            yield
    except KeyboardInterrupt:
        again = f"; continue with --resume {run_id}" if resumable else ""
        print(f"\n{prefix}interrupted{again}", file=sys.stderr)
        raise


def open_memory(
    config: RunConfig,
    endpoint: ChatModel | None = None,
    default: str = DEFAULT_MEMORY,
    *,
    reading: bool = False,
    existing: bool = False,
) -> Memory:
    """The memory the configuration names: a directory, or a chroma URL with the log in
    `default`, under its validity rules. `reading`: the store opens without an embedding
    (see `LessonStore.use` to add one). `existing`: a directory must hold a memory already
    (a command that only reads creates nothing)."""
    location = config.run.memory or default
    spec = config.run.embedding
    rules = config.validity

    def embedder() -> Any:
        return None if reading else make_embedder(spec, endpoint)  # type: ignore[arg-type]

    memory_directory(location)
    if existing:
        memory_to_read(location)
    remote = is_server(location)
    if remote:
        memory_directory(default)
    directory = log_directory(location, default)
    try:
        return Memory(directory, embedder, store=location if remote else None, rules=rules)
    except OSError as exc:  # e.g. under /proc: the checks above pass, mkdir does not
        raise UserError(
            f"--memory {directory}: cannot be created ({exc.strerror}: {exc.filename}); "
            "pass a directory on an ordinary filesystem"
        ) from exc
