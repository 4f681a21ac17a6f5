"""Reflexion with a persistent lesson memory, from Python: up to three tries at a question;
the lesson it learns stays in the memory directory, a candidate until `mulligan memory verify`
finds it helps (MULLIGAN_SHOW_CANDIDATES=1 shows it to the next run at once, marked).

    OPENAI_BASE_URL=http://127.0.0.1:8011/v1 python examples/reflexion_memory.py [MEMORY_DIR]
"""

import sys

from mulligan.errors import UserError
from mulligan.llm.connect import connect
from mulligan.memory import Memory, make_embedder
from mulligan.runs.build import actor_settings, build_loop, loop_settings
from mulligan.schema import ExactMatchCheck, Task
from mulligan.settings.loading import load_config

task = Task(
    id="capital-au",
    family="capitals",
    prompt="What is the capital city of Australia? Answer with one word.",
    checks=[ExactMatchCheck(answer="Canberra", name="capital")],
)
try:
    config = load_config({})  # flags none; MULLIGAN_*, mulligan.toml and the user file apply
    model = connect(config.endpoint)
except UserError as exc:
    sys.exit(f"reflexion_memory.py: {exc}")
memory = Memory(
    sys.argv[1] if len(sys.argv) > 1 else "mulligan-memory",
    make_embedder(config.run.embedding, model),
)
loop = build_loop(
    model, loop_settings(config, "reflexion-memory"), actor_settings(config), memory=memory
)
episode = loop.run_episode(task)
for attempt, verdict in zip(episode.attempts, episode.verdicts, strict=True):
    print(f"trial {attempt.trial}: {'PASS' if verdict.passed else 'FAIL'} {attempt.answer!r}")
for lesson in memory.lessons(episode.lessons_written):
    print(f"{lesson.kind}: {lesson.text}")
