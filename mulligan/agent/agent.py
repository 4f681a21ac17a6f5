"""A persistent agent in a few lines: a model, a memory directory and a strategy kept
together, and one call that solves a task and returns its episode.

    from mulligan import Agent
    agent = Agent("local", memory="agent-memory")  # or an endpoint's URL, or a ChatModel
    episode = agent.solve("What is 17 * 23?", checks=[NumericCheck(value=391)])

The settings come from where the commands read theirs (the keywords given here, named as the
commands' flags, then MULLIGAN_* variables, mulligan.toml and the user file), and the loop
from the one builder (mulligan/runs/build.py), so an agent's attempts are shown what
`mulligan run` would show them, and what it learns is kept in its memory as any run's is: a
later Agent on the same directory, in another process, starts from it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mulligan import strategies
from mulligan.defaults import DEFAULT_MEMORY
from mulligan.errors import UserError, field_problems
from mulligan.inputs.memory_files import is_server, memory_directory
from mulligan.llm.base import ChatModel
from mulligan.loop import Loop
from mulligan.memory import Memory, make_embedder
from mulligan.runs.build import (
    box_policy,
    connect_models,
    connect_reflector,
    loop_for,
    with_default_temperature,
)
from mulligan.runs.lifecycle import new_run_id
from mulligan.schema import Check, Episode, Lesson, Task
from mulligan.settings.fields import settings as all_settings
from mulligan.settings.loading import load_config
from mulligan.text_cut import id_words

URL = re.compile(r"^https?://")


class Agent:
    """`model`: a ChatModel (the scripted model, your own), an OpenAI-compatible endpoint's
    URL, a model name (`local`, `local:0.5b`, or the endpoint's own name), or None for the
    endpoint the settings name. `memory`: a directory (default: the settings' `--memory`,
    else ~/.mulligan) or an opened Memory. `strategy`: default the agent loop with its lesson
    memory (reflexion-memory). `reflector`: another model writes the lessons (a ChatModel or
    a model name on the same endpoint). `settings`: any setting by its flag's name
    (`trials=3`, `embedding="hash"`, `min_similarity=0.2`, `show_candidates=True`, ...).

    Bad input (an unknown setting, a bad value, a memory path that cannot be used, no
    endpoint) raises `UserError` here, before any task."""

    def __init__(
        self,
        model: ChatModel | str | None = None,
        memory: str | Path | Memory | None = None,
        strategy: str | None = None,
        *,
        reflector: ChatModel | str | None = None,
        **settings: Any,
    ) -> None:
        given_kinds(model, reflector, memory)
        if strategy is not None and not isinstance(strategy, str):
            raise UserError(f"Agent(strategy={strategy!r}): a strategy's name, such as 'retry'")
        flags = dict(settings)
        named = {one.flag for one in all_settings() if one.flag} - {"model", "memory"}
        unknown = sorted(set(flags) - named)
        if unknown:
            raise UserError(
                f"Agent({unknown[0]}=...): no such setting; settings are named as the "
                "commands' flags (trials, embedding, min_similarity, show_candidates, ...: "
                "`mulligan config reference` lists them)"
            )
        if isinstance(model, str):
            flags["base_url" if URL.match(model) else "model"] = model
        if isinstance(reflector, str):
            flags["reflector_model"] = reflector
        if isinstance(memory, str | Path):
            flags["memory"] = str(memory)
        self.strategy = strategies.for_loop(strategy or strategies.agent_default().name)
        config = load_config(flags)
        repeats = config.loop.trials > 1 and self.strategy.repeats
        self.config = with_default_temperature(config, repeats)
        self.model, self.reflector = self._models(model, reflector)
        self.memory = memory if isinstance(memory, Memory) else self._open_memory()
        if self.memory.frozen and self.strategy.writes_store:
            raise UserError(
                f"Agent(memory={self.memory.where!r}): frozen, and {self.strategy.name} writes "
                "lessons to it; pass a Memory not frozen, or strategy='memory-frozen'"
            )
        if self.strategy.uses_store or self.strategy.writes_store:
            self.memory.store  # noqa: B018  another embedding's store, or none installed, stops here
        self.run_id = f"agent-{new_run_id(None)}"
        """The run the agent's episodes belong to in the memory's log (one per Agent)."""
        self._loop: Loop | None = None

    def solve(
        self,
        task: Task | str,
        checks: Sequence[Check] = (),
        *,
        task_id: str | None = None,
        family: str | None = None,
    ) -> Episode:
        """Attempt the task under the agent's strategy until its checks pass or the trials run
        out, and return the episode (`episode.passed`, each attempt and verdict, the ids of
        the lessons it wrote: `agent.lessons(episode.lessons_written)`).

        `task`: a Task, or a prompt with its `checks` (a check that can be seen is feedback
        to the agent; with none, nothing tells an attempt it failed). A prompt's id is made
        from its text (the same prompt is the same task in every session) unless `task_id`
        names it; `family` groups the tasks whose lessons are shared (default: custom)."""
        if isinstance(task, Task):
            if checks or task_id or family:
                raise UserError("Agent.solve: a Task carries its own checks, id and family")
            chosen = task
        else:
            chosen = task_of(task, checks, task_id, family)
        return self.loop.run_episode(chosen)

    def lessons(self, ids: Sequence[str] | None = None) -> list[Lesson]:
        """The lessons of these ids as the memory holds them now (default: every stored one,
        cases included), each with its status and evidence; an id the memory does not hold is
        a UserError naming it."""
        if ids is None:
            return self.memory.store.all()
        if isinstance(ids, str):
            raise UserError("Agent.lessons: a list of lesson ids, not str: pass [ID]")
        if not all(isinstance(i, str) for i in ids):
            raise UserError(f"Agent.lessons: a list of lesson ids, not {list(ids)!r}")
        found = self.memory.lessons(list(ids))
        held = {lesson.id for lesson in found}
        unknown = [repr(i) for i in dict.fromkeys(ids) if i not in held]
        if unknown:
            raise UserError(f"Agent.lessons: no lesson {', '.join(unknown)} in {self.memory.where}")
        return found

    @property
    def loop(self) -> Loop:
        """The loop every `solve` runs (built on first use, by the one builder)."""
        if self._loop is None:
            self._loop = loop_for(
                self.config, self.model, self.strategy.name, self.memory, self.run_id,
                policy=box_policy(self.config), reflector=self.reflector,
            )  # fmt: skip
        return self._loop

    def _models(
        self, model: ChatModel | str | None, reflector: ChatModel | str | None
    ) -> tuple[ChatModel, ChatModel]:
        """The actor's model and the reflector's: those given, the others connected."""
        given = model if model is not None and not isinstance(model, str) else None
        own = reflector if reflector is not None and not isinstance(reflector, str) else None
        if given is None:
            actor, feedback = connect_models(self.config)
            return actor, own or feedback
        if own is None and isinstance(reflector, str):
            own = connect_reflector(self.config)
        return given, own or given

    def _open_memory(self) -> Memory:
        location = self.config.run.memory or DEFAULT_MEMORY
        if is_server(location):
            raise UserError(
                f"Agent(memory={location!r}): a lesson store on a chroma server needs a log "
                "directory too: pass Memory(DIRECTORY, store=URL)"
            )
        memory_directory(location)
        spec, model = self.config.run.embedding, self.model
        endpoint: Any = model if hasattr(model, "embed") else None
        return Memory(location, lambda: make_embedder(spec, endpoint), rules=self.config.validity)


def given_kinds(model: object, reflector: object, memory: object) -> None:
    """Refuse a model, reflector or memory of the wrong kind here, before anything is made
    (a blank memory, or one of no kind known, would otherwise leave the default directory in
    use, and a memory of spaces would be made a directory of that name)."""
    for name, value in (("model", model), ("reflector", reflector)):
        if value is not None and not isinstance(value, str) and not hasattr(value, "chat"):
            raise UserError(
                f"Agent({name}={value!r}): a ChatModel, an endpoint's URL or a model name"
            )
    blank = isinstance(memory, str) and not memory.strip()
    if blank or (memory is not None and not isinstance(memory, str | Path | Memory)):
        raise UserError(f"Agent(memory={memory!r}): a directory (a str or Path) or a Memory")


def task_of(prompt: str, checks: Sequence[Check], task_id: str | None, family: str | None) -> Task:
    """A task from a prompt and its checks; its id, unless given, made from the prompt."""
    if not isinstance(prompt, str):
        raise UserError(f"Agent.solve: the task is a Task or a prompt, not {type(prompt).__name__}")
    if not isinstance(checks, Sequence) or isinstance(checks, str):
        raise UserError(f"Agent.solve: checks: a list of checks, not {type(checks).__name__}")
    words = id_words(prompt, 6)
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:8]
    fields: dict[str, Any] = {
        "id": task_id or "-".join([*words, digest]),
        "prompt": prompt,
        "checks": list(checks),
    }
    if family is not None:
        fields["family"] = family
    try:
        return Task.model_validate(fields)
    except ValidationError as exc:
        raise UserError(f"Agent.solve: {field_problems(exc, 'task')[0]}") from exc
