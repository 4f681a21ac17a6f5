"""The one place that wires a model, the actor, the evaluator, the reflector and the memory
into a `Loop`: `run`, `bench`, `solve`, the Ray worker and the Python API all build theirs
here.

    from mulligan.build import build_loop
    loop = build_loop(model, LoopSettings(strategy="reflexion-memory"), memory=Memory(dir))
    episode = loop.run_episode(task)
"""

from __future__ import annotations

from mulligan import strategies
from mulligan.actor import Actor, ActorSettings
from mulligan.actor.tools import Approver
from mulligan.evaluator import Evaluator
from mulligan.evaluator.selector import Selector
from mulligan.llm.base import ChatModel
from mulligan.loop import Loop, LoopSettings
from mulligan.memory import Memory
from mulligan.reflector import Reflector
from mulligan.sandbox import Policy


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
    feedback: ChatModel | None = None,
) -> Loop:
    """One model as actor, judge and reflector (the reflector only for strategies that
    reflect). `evaluator`: another one (solve's records each attempt's changes); `policy`:
    what the box hides (the suite's answers, config files; the memory is added);
    `feedback`: a model of its own for the reflector and a selection's inputs."""
    settings = settings or LoopSettings()
    strategy = strategies.get(settings.strategy)
    reflects, feedback = strategy.reflects, feedback or model
    return Loop(
        actor=Actor(model, actor_settings or ActorSettings(), approve=approve),
        evaluator=evaluator or Evaluator(judge=model),
        settings=settings,
        reflector=Reflector(feedback) if reflects else None,
        memory=memory,
        run_id=run_id,
        policy=policy or Policy(),
        selector=Selector(feedback, settings.separate) if strategy.draws_candidates else None,
    )
