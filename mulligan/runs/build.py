"""The one place that wires a model, the actor, the evaluator, the reflector and the memory
into a `Loop`: `run`, `bench`, `solve`, the Ray worker and the Python API all build theirs
here.

    from mulligan.runs.build import build_loop
    loop = build_loop(model, LoopSettings(strategy="reflexion-memory"), memory=Memory(dir))
    episode = loop.run_episode(task)

`loop_for` builds one from the run configuration (what the commands and the Ray workers use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mulligan import strategies
from mulligan.actor import Actor, ActorSettings
from mulligan.actor.tools import Approver
from mulligan.errors import UserError
from mulligan.evaluator import Evaluator
from mulligan.evaluator.selector import Selector
from mulligan.llm.base import ChatModel
from mulligan.llm.connect import connect, connect_second
from mulligan.llm.local_model import Reporter
from mulligan.llm.local_server import ServerSettings, context_per_slot
from mulligan.loop import Loop, LoopSettings
from mulligan.memory import Memory
from mulligan.reflector import Reflector
from mulligan.sandbox import Policy
from mulligan.settings.run_config import (
    DETERMINISTIC_TEMPERATURE,
    REPEATED_TEMPERATURE,
    RunConfig,
    section_fields,
)

if TYPE_CHECKING:
    from mulligan.llm.openai_client import OpenAIChatModel  # openai loads on connect()


def connect_models(
    config: RunConfig, reporter: Reporter | None = None
) -> tuple[OpenAIChatModel, ChatModel]:
    """The actor's model and the feedback model (reflector, self-tests, a selection's inputs,
    the curator): the actor's own unless [reflector] names one, connected here and nowhere
    else (the commands through their pipeline, an `Agent` directly). `reporter` hears how a
    local model is being prepared."""
    actor = connect(config.endpoint, reporter=reporter, local=local_server_settings(config))
    feedback = connect_second(config.reflector, config.endpoint, reporter)
    return actor, feedback or actor


def connect_reflector(config: RunConfig, reporter: Reporter | None = None) -> ChatModel:
    """The feedback model alone, for what reflects but never acts (the memory service, an
    Agent given its own actor): the one [reflector] names, else the endpoint's."""
    named = connect_second(config.reflector, config.endpoint, reporter)
    return named or connect(config.endpoint, reporter=reporter, local=local_server_settings(config))


def connect_stronger(config: RunConfig, reporter: Reporter | None = None) -> ChatModel | None:
    """The stronger model [escalation] names (None: none), for a strategy that escalates: at
    the actor's temperature (its attempts are the actor's later trials), reached where the
    endpoint is unless the section says otherwise."""
    temperature, local = config.endpoint.temperature, local_server_settings(config)
    return connect_second(config.escalation, config.endpoint, reporter, temperature, local)


ESCALATION_MISSING = (
    "strategy {strategy!r} hands a task to a stronger model: name it with --escalate-to MODEL "
    "([escalation] model in mulligan.toml)"
)


def build_loop(
    model: ChatModel,
    settings: LoopSettings | None = None,
    actor_settings: ActorSettings | None = None,
    memory: Memory | None = None,
    run_id: str = "",
    *,
    approve: Approver | None = None,
    evaluator: Evaluator | None = None,
    policy: Policy | None = None,
    reflector: ChatModel | None = None,
    escalation: ChatModel | None = None,
) -> Loop:
    """One model as actor and judge, and as the feedback model unless `reflector` is
    another: the reflector (only for strategies that reflect) and a selection's input writer.
    `evaluator`: another one (solve's records each attempt's changes); `policy`: what the box
    hides (the suite's answers, config files; the memory is added); `escalation`: the
    stronger model a strategy that escalates hands its later trials to."""
    settings = settings or LoopSettings()
    strategy = strategies.get(settings.strategy)
    if strategy.escalates and escalation is None:
        raise UserError(ESCALATION_MISSING.format(strategy=strategy.name))
    reflects, feedback = strategy.reflects, reflector or model
    actor_settings = actor_settings or ActorSettings()
    return Loop(
        actor=Actor(model, actor_settings, approve=approve),
        evaluator=evaluator or Evaluator(judge=model),
        settings=settings,
        reflector=Reflector(feedback) if reflects else None,
        memory=memory,
        run_id=run_id,
        policy=policy or Policy(),
        selector=Selector(feedback, settings) if strategy.draws_candidates else None,
        escalation=Actor(escalation, actor_settings, approve=approve) if escalation else None,
    )


def loop_for(
    config: RunConfig,
    model: ChatModel,
    strategy: str,
    memory: Memory | None = None,
    run_id: str = "",
    *,
    policy: Policy | None = None,
    reflector: ChatModel | None = None,
    approve: Approver | None = None,
    evaluator: Evaluator | None = None,
    actor: dict[str, Any] | None = None,
    escalation: ChatModel | None = None,
    **loop: Any,
) -> Loop:
    """The loop the run configuration describes for one strategy. `actor`: settings a
    command adds to the actor's (solve nudges a reply without tools); `loop`: to the loop's
    (extra tools, where attempts work)."""
    return build_loop(
        model,
        loop_settings(config, strategy, **loop),
        actor_settings(config, **(actor or {})),
        memory,
        run_id,
        approve=approve,
        evaluator=evaluator,
        policy=policy,
        reflector=reflector,
        escalation=escalation,
    )


def actor_settings(config: RunConfig, **more: Any) -> ActorSettings:
    """The actor's settings; the budget fields given anywhere override a task's own."""
    forced = tuple(name for name in section_fields("budget") if config.given(f"budget.{name}"))
    return ActorSettings(
        protocol=config.actor.protocol,
        budget=config.budget,
        forced=forced,
        compression=config.compression,
        **more,
    )


def loop_settings(config: RunConfig, strategy: str, **more: Any) -> LoopSettings:
    """The loop's settings for one strategy (`more`: what the command adds, such as extra
    tools or where attempts work)."""
    chosen = {
        **config.loop.model_dump(),
        **config.memory.model_dump(),  # what a memory arm is shown
        "concurrency": config.run.concurrency,  # a selection's candidates at once
        **more,
    }
    return LoopSettings(strategy=strategy, **chosen)


def with_default_temperature(config: RunConfig, repeats: bool) -> RunConfig:
    """The configuration as a run records it: a temperature nobody set is the default for a
    run that `repeats` a task over several trials (some variety) or for one that does not."""
    if config.endpoint.temperature is not None:
        return config
    chosen = REPEATED_TEMPERATURE if repeats else DETERMINISTIC_TEMPERATURE
    why = "the default for repeated trials" if repeats else "the default for one trial"
    return config.updated("endpoint.temperature", chosen, why)


def local_server_settings(config: RunConfig) -> ServerSettings:
    """The local server's shape: a slot per task run at once unless `[local] slots` says
    otherwise, each slot holding compression's threshold and a capped reply."""
    return ServerSettings(
        slots=config.local.slots or config.run.concurrency,
        threads=config.local.threads,
        context_per_slot=context_per_slot(
            config.compression.threshold_tokens, config.budget.max_reply_tokens
        ),
    )


def box_policy(config: RunConfig) -> Policy:
    """What the box hides for a run under this configuration: the settings files it was read
    from (they may hold an API key)."""
    return Policy().hiding(*config.files)
