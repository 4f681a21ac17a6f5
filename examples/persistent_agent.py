"""A persistent agent on the scripted model: run it twice on one memory directory and watch
one lesson earn its place across the two processes.

    python examples/persistent_agent.py MEMORY_DIR    # today's three tasks
    python examples/persistent_agent.py MEMORY_DIR    # tomorrow's three, in a new process

The tasks ask for a path's length in metres. The scripted actor answers in km unless a
lesson in its prompt says to convert; the scripted reflector, on the first task's failure,
writes that lesson. The lesson starts as a candidate: later attempts are assigned at random
to be shown it or not, each pair of outcomes is its evidence, and once it has helped enough
it is validated and every attempt sees it, trial 1 included. Against your own model:
`Agent("local", memory=...)` or `Agent("http://HOST/v1", memory=...)` in place of the
scripted one.
"""

import json
import sys

from mulligan import Agent
from mulligan.schema import ExactMatchCheck
from mulligan.testing import ScriptedModel

LESSON = (
    "When a path is given in km and the question asks how long it is in metres, "
    "answer with the number of km times 1000."
)
TASKS_A_DAY = 3


def scripted(messages: list, tools: object) -> str:
    """The actor and the reflector, played back: right only with the lesson in sight."""
    text = json.dumps(messages)
    if "You review a failed attempt" in text:  # the reflector
        first = "A path is 1 km" in text  # only the first task's failure teaches the rule
        diagnosis = "The answer was in km; the question asks for metres."
        return json.dumps({"diagnosis": diagnosis, "lesson": LESSON if first else ""})
    km = int(text.split("A path is ")[1].split(" km")[0])
    return str(km * 1000) if LESSON in text else str(km)


agent = Agent(ScriptedModel(policy=scripted), memory=sys.argv[1], embedding="hash")
done = len(agent.memory.log.episodes())  # the tasks earlier sessions did
for km in range(done + 1, done + TASKS_A_DAY + 1):
    prompt = f"A path is {km} km long. How long is it in metres? Answer with the number."
    episode = agent.solve(prompt, [ExactMatchCheck(answer=str(km * 1000))], family="units")
    shown = [LESSON in [x.text for x in agent.lessons(a.lesson_ids)] for a in episode.attempts]
    trials = " ".join(
        f"{'PASS' if v.passed else 'FAIL'}{' (shown the lesson)' if seen else ''}"
        for v, seen in zip(episode.verdicts, shown, strict=True)
    )
    print(f"task {km}: {trials}")
    for lesson in agent.lessons():
        if lesson.text == LESSON:
            e = lesson.validity.evidence
            print(
                f"  lesson {lesson.id}: {lesson.validity.status}, "
                f"pairs {e.pairs} (helped {e.helped}, hurt {e.hurt})"
            )
