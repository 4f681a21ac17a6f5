"""Reflexion with a persistent lesson memory, from Python: up to three tries at a question;
the lesson it learns stays in the memory directory for the next run, a candidate until later
attempts show that it helps.

    OPENAI_BASE_URL=http://127.0.0.1:8011/v1 python examples/reflexion_memory.py [MEMORY_DIR]
"""

import sys

from mulligan import Agent
from mulligan.errors import UserError
from mulligan.schema import ExactMatchCheck, Task

task = Task(
    id="capital-au",
    family="capitals",
    prompt="What is the capital city of Australia? Answer with one word.",
    checks=[ExactMatchCheck(answer="Canberra", name="capital")],
)
try:  # the endpoint and settings as the commands read them: MULLIGAN_*, mulligan.toml
    agent = Agent(memory=sys.argv[1] if len(sys.argv) > 1 else "mulligan-memory")
except UserError as exc:
    sys.exit(f"reflexion_memory.py: {exc}")
episode = agent.solve(task)
for attempt, verdict in zip(episode.attempts, episode.verdicts, strict=True):
    print(f"trial {attempt.trial}: {'PASS' if verdict.passed else 'FAIL'} {attempt.answer!r}")
for lesson in agent.lessons(episode.lessons_written):
    print(f"{lesson.kind}: {lesson.text}")
