"""Lesson counters under contention: updates made against updates counted, and time per update.

P processes share one memory directory; each makes R rounds of one `helped` and one `hurt`
on the same three stored lessons (as the loop does after a verdict), with `--threads T`
threads in each. It prints how many updates each lesson should have, how many the log and
the store's copy hold, and the mean wall time per update.

    python benchmarks/counters.py [--processes 3] [--threads 1] [--rounds 30]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import Lesson, LessonScope

WORKER = """
import concurrent.futures, sys
from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import Attempt, Episode, Verdict
memory = Memory(sys.argv[1], HashEmbedding())
name, rounds, threads = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def one(n):
    helps, hurts = memory.store.get(["helps", "hurts"])  # each use holds its own copies
    for passed, given in ((True, [helps]), (False, [hurts])):
        episode = Episode(id=f"{name}-{n}-{passed}", task_id="t", strategy="reflexion-memory")
        memory.start_episode(episode)
        attempt = Attempt(task_id="t", lesson_ids=[x.id for x in given])
        memory.finish_attempt(episode, attempt, Verdict(passed=passed, score=float(passed)), given)

with concurrent.futures.ThreadPoolExecutor(threads) as pool:
    list(pool.map(one, range(rounds)))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        memory = Memory(directory, HashEmbedding())
        for lesson_id, text in (
            ("helps", "Check the official seat of government before naming a capital."),
            ("hurts", "Answer capital questions with the largest city of the country."),
        ):
            memory.keep(
                Lesson(id=lesson_id, text=text, scope=LessonScope(family="f")), persistent=True
            )
        started = time.perf_counter()
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    WORKER,
                    directory,
                    f"p{n}",
                    str(args.rounds),
                    str(args.threads),
                ]
            )  # fmt: skip
            for n in range(args.processes)
        ]
        for worker in workers:
            worker.wait()
        seconds = time.perf_counter() - started
        expected = args.processes * args.rounds
        memory = Memory(directory, HashEmbedding())
        logged = {lesson.id: lesson.validity for lesson in memory.lessons(["helps", "hurts"])}
        cached = {lesson.id: lesson.validity for lesson in memory.store.get(["helps", "hurts"])}
        print(f"{args.processes} processes x {args.threads} threads x {args.rounds} rounds")
        for lesson_id, counter in (("helps", "helped"), ("hurts", "hurt")):
            made = expected
            in_log = getattr(logged[lesson_id], counter) if lesson_id in logged else 0
            in_store = getattr(cached[lesson_id], counter)
            print(
                f"  {lesson_id}: {counter} updates made {made}, in the log {in_log}, "
                f"in the store {in_store} (lost {made - in_store}); "
                f"status {cached[lesson_id].status}"
            )
        print(f"  {seconds / (2 * expected) * 1000:.1f} ms of wall time per update")


if __name__ == "__main__":
    main()
