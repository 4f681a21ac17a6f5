"""The study offline: a labelled scripted model behind the package's own fake endpoint.

Ten small tasks of three kinds, chosen so that what each strategy carries over
matters, and the counts follow from the script alone:

  easy   (3)  answered right at once.
  flaky  (3)  answered right on the model's second try at the task, lessons or not
              (a stand-in for sampling at temperature above 0; a carried previous
              attempt says a try was made, on whichever endpoint).
  units  (4)  answered right only when a lesson about converting units is in the
              messages; the scripted reflector writes that lesson after a failure
              (and, asked for an insight after a success, the same lesson again).

With 3 trials: react solves 3, retry 6, reflexion 10 (the units tasks at trial 2),
and reflexion-memory 10, six of them at trial 1 (later units tasks find the general
lesson that the first one wrote: the demo shows unverified lessons, marked so; by default
only verified ones reach the actor, docs/memory.md). The study is paired: react makes
trial 1 once per task, retry and reflexion continue from it, so their endpoints count it as
a try made.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

from mulligan import strategies as registry
from mulligan.llm.base import ChatModel
from mulligan.llm.fake_server import FakeOpenAIServer, FakeReply
from mulligan.llm.pricing import Price
from mulligan.memory import Memory
from mulligan.schema import ExactMatchCheck, Task
from mulligan.settings.run_config import REPEATED_TEMPERATURE, RunConfig
from mulligan.studies.study import Study, first_attempt_source

DEMO_MODEL = "scripted-demo (not a language model)"
DEMO_LABEL = "scripted demo model, not a language model"
DEMO_EMBEDDING = "hash"
"""Offline, and lexical: the scripted lessons are found by their words."""
UNITS_LESSON = "How many metres long is a length in km? Multiply the km by 1000."
UNITS_DIAGNOSIS = (
    "The answer gave the length in km; the check wanted metres: multiply the km by 1000."
)
FLAKY_LESSON = "Read the question twice and answer with the name only."
FLAKY_DIAGNOSIS = "The answer named the wrong thing; read the question again before naming it."
RIGHT_WHEN = "multiply the km by 1000"
PREVIOUS = "Your previous attempt at this task failed"
"""In the messages from trial 2 on: a try at the task made, whichever endpoint made it."""


@dataclass(frozen=True)
class DemoTask:
    id: str
    kind: str
    prompt: str
    answer: str
    wrong: str


DEMO_TASKS = [
    DemoTask("demo/easy-1", "easy", "What is 2 + 3? Answer with the number.", "5", "6"),
    DemoTask("demo/easy-2", "easy", "What is 7 times 6? Answer with the number.", "42", "48"),
    DemoTask("demo/easy-3", "easy", "What is 10 minus 4? Answer with the number.", "6", "4"),
    DemoTask("demo/flaky-1", "flaky", "Which planet is known as the red planet?", "Mars", "Venus"),
    DemoTask(
        "demo/flaky-2", "flaky", "Which is the largest ocean on Earth?", "Pacific", "Atlantic"
    ),
    DemoTask(
        "demo/flaky-3", "flaky", "Which metal is liquid at room temperature?", "Mercury", "Lead"
    ),
    DemoTask(
        "demo/units-1", "units", "A trail is 3 km long. How long is it in metres?", "3000", "3"
    ),
    DemoTask("demo/units-2", "units", "A race is 5 km. How many metres is that?", "5000", "5"),
    DemoTask(
        "demo/units-3", "units", "A river is 12 km long. Give its length in metres.", "12000", "12"
    ),
    DemoTask(
        "demo/units-4", "units", "A bridge is 2 km long. How many metres long is it?", "2000", "2"
    ),
]
FAMILIES = {"easy": "demo-arithmetic", "flaky": "demo-facts", "units": "demo-units"}


def demo_tasks() -> list[Task]:
    return [
        Task(
            id=t.id,
            family=FAMILIES[t.kind],
            prompt=t.prompt,
            checks=[ExactMatchCheck(answer=t.answer, name="answer")],
            metadata={"kind": t.kind},
        )
        for t in DEMO_TASKS
    ]


class DemoPolicy:
    """The scripted model: deterministic given the messages and its own per-task try count."""

    def __init__(self, tried_once: bool = False) -> None:
        self.tries: Counter[str] = Counter()
        if tried_once:  # trial 1 came from another endpoint (a paired study shares it)
            self.tries.update(t.id for t in DEMO_TASKS)
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> FakeReply:
        messages = body["messages"]
        text = json.dumps(messages)
        task = next((t for t in DEMO_TASKS if t.prompt in text), None)
        if task is None:
            return FakeReply(content="I am a scripted demo model and know no such task.")
        first = str(messages[0].get("content"))
        if "You review a failed attempt" in first or "then solved it" in first:
            units = task.kind == "units"
            reply = {
                "diagnosis": UNITS_DIAGNOSIS if units else FLAKY_DIAGNOSIS,
                "lesson": UNITS_LESSON if units else FLAKY_LESSON,
                "tags": [task.kind],
                "replaces": [],
            }
            return FakeReply(content=json.dumps(reply))
        with self.lock:
            self.tries[task.id] += 1
            tries = self.tries[task.id]
        right = (
            task.kind == "easy"
            or (task.kind == "flaky" and (tries >= 2 or PREVIOUS in text))
            or (task.kind == "units" and RIGHT_WHEN in text.lower())
        )
        return FakeReply(content=task.answer if right else task.wrong)


class DemoEndpoints:
    """One fake endpoint per strategy, each with a fresh copy of the same script."""

    def __init__(self) -> None:
        self.servers: dict[str, FakeOpenAIServer] = {}

    def url_for(self, strategy: str, tried_once: bool = False) -> str:
        """`tried_once`: the strategy continues from a trial 1 that another endpoint made."""
        if strategy not in self.servers:
            policy = DemoPolicy(tried_once)
            self.servers[strategy] = FakeOpenAIServer(policy=policy).start()
        return self.servers[strategy].base_url

    def close(self) -> None:
        for server in self.servers.values():
            server.stop()


EXPECTED = {
    "react": [3, 3, 3],
    "retry": [3, 6, 6],
    "reflexion": [3, 10, 10],
    "reflexion-memory": [6, 10, 10],
}
"""Cumulative tasks solved by trial 1, 2, 3 that the script implies (3 trials)."""


DEMO_ENDPOINT = "the package's fake endpoint on 127.0.0.1"


def demo_study(endpoints: DemoEndpoints, memory: Memory, seed: int) -> Study:
    """The study `mulligan demo` runs: each strategy's scripted endpoint (its memory should
    embed by hashing: see DEMO_EMBEDDING)."""
    from mulligan.llm.openai_client import OpenAIChatModel

    models: dict[str, OpenAIChatModel] = {}
    strategies = list(EXPECTED)
    source = first_attempt_source(strategies, "paired")

    def model_for(strategy: str) -> ChatModel:
        if strategy not in models:
            branched = strategy != source and registry.get(strategy).shares_first_attempt
            models[strategy] = OpenAIChatModel(
                DEMO_MODEL,
                base_url=endpoints.url_for(strategy, tried_once=branched),
                temperature=REPEATED_TEMPERATURE,
                price=Price(0.0, 0.0),  # a script on this machine: free, and known to be
            )
        return models[strategy]

    config = RunConfig.model_validate(
        {
            "endpoint": {"model": DEMO_MODEL, "temperature": REPEATED_TEMPERATURE},
            "budget": {"max_steps": 4},
            "loop": {"trials": 3},
            "memory": {"show_candidates": True},  # a short scripted run: lessons at once
        }
    )
    return Study(
        tasks=demo_tasks(),
        strategies=strategies,
        model_for=model_for,
        memory=memory,
        config=config,
        seed=seed,
        info={
            "suite": "demo",
            "scripted": True,
            "label": DEMO_LABEL,
            "endpoint": DEMO_ENDPOINT,  # one per strategy, on ports that change from run to run
        },
    )
