"""What the memory tests share: a memory with planted lessons, a scripted model that answers
right only when a given text is in its prompt, and one-trial loops over it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mulligan.loop import Loop, LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.runs.build import build_loop
from mulligan.schema import ExactMatchCheck, Lesson, LessonScope, LessonSource, Task
from mulligan.testing import ScriptedModel

RIGHT = "Convert the km to metres by multiplying by 1000."
WRONG = "Give lengths in km whatever the question asks."


def plant(
    memory: Memory, lesson_id: str, text: str, family: str = "units", status: str = "candidate"
) -> Lesson:
    lesson = Lesson(
        id=lesson_id,
        text=text,
        scope=LessonScope(family=family),
        source=LessonSource(task_id="elsewhere", model="human"),
    )
    lesson.validity.status = status  # type: ignore[assignment]
    return memory.keep(lesson, persistent=True)


def units_tasks(count: int = 3) -> list[Task]:
    return [
        Task(
            id=f"units-{n}",
            family="units",
            prompt=f"A path is {n} km long. How long is it in metres?",
            checks=[ExactMatchCheck(answer=str(n * 1000), name="answer")],
        )
        for n in range(1, count + 1)
    ]


def prompt_of(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages)


def units_model(right_when: str | None = RIGHT, wrong_when: str | None = None) -> ScriptedModel:
    """Answers in metres when `right_when` is in the prompt (always, when it is None), and in
    km whenever `wrong_when` is."""

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        text = prompt_of(messages)
        km = int(text.split("A path is ")[1].split(" km")[0])  # the task, pinned first
        right = right_when is None or right_when in text
        right = right and not (wrong_when and wrong_when in text)
        return str(km * 1000) if right else str(km)

    return ScriptedModel(policy=policy)


def one_trial(model: ScriptedModel, memory: Memory, **settings: Any) -> Any:
    """The verifier's loops: one attempt each, over this model and memory."""

    def make(strategy: str) -> Loop:
        loop_settings = LoopSettings(strategy=strategy, trials=1, min_similarity=0.0, **settings)
        return build_loop(model, loop_settings, memory=memory)

    return make


def fresh(tmp_path: Path) -> Memory:
    return Memory(tmp_path / "mem", HashEmbedding())


DIAGNOSIS = "Look at the unit the question asks for."


def working_model(
    right_when: str | None = None, wrong_when: str | None = None, retry_right: bool = False
) -> ScriptedModel:
    """Answers in metres when `right_when` is in the prompt (`retry_right`: on any attempt
    after the first, which carries the reviewer's diagnosis), in km whenever `wrong_when` is;
    the reviewer diagnoses and writes no general lesson."""

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        if "You review a failed attempt" in messages[0]["content"]:
            return json.dumps({"diagnosis": DIAGNOSIS, "lesson": ""})
        text = prompt_of(messages)
        km = int(text.split("A path is ")[1].split(" km")[0])
        right = bool(right_when and right_when in text) or (retry_right and DIAGNOSIS in text)
        right = right and not (wrong_when and wrong_when in text)
        return str(km * 1000) if right else str(km)

    return ScriptedModel(policy=policy)
