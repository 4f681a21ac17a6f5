"""Reflexion with a persistent lesson memory, from Python: up to three tries at a question;
the lesson it learns stays in the memory directory for the next run (and other tasks).

    OPENAI_BASE_URL=http://127.0.0.1:8011/v1 python examples/reflexion_memory.py [MEMORY_DIR]
"""

import sys

from mulligan.build import build_loop
from mulligan.config import load_settings
from mulligan.errors import UserError
from mulligan.llm.connect import connect
from mulligan.loop import LoopSettings
from mulligan.memory import Memory, make_embedder
from mulligan.schema import ExactMatchCheck, Task

task = Task(
    id="capital-au",
    family="capitals",
    prompt="What is the capital city of Australia? Answer with one word.",
    checks=[ExactMatchCheck(answer="Canberra", name="capital")],
)
try:
    settings = load_settings({})
    model = connect(settings)
except UserError as exc:
    sys.exit(f"reflexion_memory.py: {exc}")
memory = Memory(
    sys.argv[1] if len(sys.argv) > 1 else "mulligan-memory",
    make_embedder(settings.embedding, model),
)
loop = build_loop(model, LoopSettings(strategy="reflexion-memory", trials=3), memory=memory)
episode = loop.run_episode(task)
for attempt, verdict in zip(episode.attempts, episode.verdicts, strict=True):
    print(f"trial {attempt.trial}: {'PASS' if verdict.passed else 'FAIL'} {attempt.answer!r}")
for lesson in memory.lessons(episode.lessons_written):
    print(f"{lesson.kind}: {lesson.text}")
