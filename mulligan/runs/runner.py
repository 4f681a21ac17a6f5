"""Run a loop over many tasks: concurrently, logged, resumable."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from mulligan.evaluator.self_tests import SelfTestWriter, with_self_tests
from mulligan.loop import Drawn, Loop
from mulligan.memory import Memory
from mulligan.memory.log import EpisodeLog
from mulligan.schema import Episode, Task

if TYPE_CHECKING:
    from mulligan.runs.executors import Executor


def self_tests_for(
    log: EpisodeLog, run_id: str, writer: SelfTestWriter, count: int
) -> Callable[[Task], Task]:
    """The task with its self-tests as visible checks: written once per run and task and
    kept in the log, so every strategy of a study (and a resumed run) checks the same ones."""

    def prepare(task: Task) -> Task:
        kept = log.self_tests(run_id, task.id)
        if kept is None:
            kept = writer.write(task, count).as_json()
            log.keep_self_tests(run_id, task.id, kept)
        return with_self_tests(task, list(kept["tests"]))

    return prepare


def episode_id(run_id: str, strategy: str, task_id: str, run_pass: int = 1, repeat: int = 1) -> str:
    """Deterministic, so a resumed run finds the episodes it already has; a later pass over
    the memory and a later repeat of the study each have their own."""
    return f"{run_id}:{strategy}:{task_id}{later_suffix(run_pass, repeat)}"


def later_suffix(run_pass: int, repeat: int) -> str:
    """What marks the episode of a later pass or repeat, after the task's id."""
    return (f":pass{run_pass}" if run_pass > 1 else "") + (f":repeat{repeat}" if repeat > 1 else "")


def run_tasks(
    make_loop: Callable[[], Loop],
    tasks: list[Task],
    *,
    run_id: str,
    strategy: str,
    memory: Memory,
    concurrency: int = 1,
    run_pass: int = 1,
    repeat: int = 1,
    on_episode: Callable[[Task, Episode], None] | None = None,
    drawn: Callable[[Task], Drawn] | None = None,
    executor: Executor | None = None,
    prepare: Callable[[Task], Task] | None = None,
) -> list[Episode]:
    """Episodes for every task in order; finished ones are read back from the log, not redone.

    With concurrency above 1, tasks run on threads (the endpoint is the bottleneck);
    `make_loop` is called once per thread so loops share nothing mutable. `drawn` gives a
    task's attempts already made from its bare prompt (a paired study). Another `executor`
    (Ray) runs the episodes elsewhere; this process still writes the log. `prepare` turns a
    task into the one its episode runs (its self-tests added), above the loop. `run_pass` and
    `repeat` name the episodes of a later pass over the memory, or of a later repeat of a study.
    """
    if prepare is not None:  # each task's self-tests, `concurrency` written at once
        with concurrent.futures.ThreadPoolExecutor(max(1, concurrency)) as pool:
            tasks = list(pool.map(prepare, tasks))
    if executor is not None:
        jobs = [
            (n, t, episode_id(run_id, strategy, t.id, run_pass, repeat))
            for n, t in enumerate(tasks)
        ]
        return executor.run(make_loop, jobs, memory, concurrency, on_episode, drawn)
    local = threading.local()
    lock = threading.Lock()

    def one(position: int, task: Task) -> Episode:
        eid = episode_id(run_id, strategy, task.id, run_pass, repeat)
        done = memory.log.episode(eid) if memory.log.is_finished(eid) else None
        if done is None:
            if not hasattr(local, "loop"):
                local.loop = make_loop()
            done = local.loop.run_episode(task, eid, position, drawn(task) if drawn else None)
        if on_episode:
            with lock:
                on_episode(task, done)
        return done

    if concurrency <= 1:
        return [one(n, t) for n, t in enumerate(tasks)]
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        futures = [pool.submit(one, n, t) for n, t in enumerate(tasks)]
        try:
            return [f.result() for f in futures]
        except BaseException:  # interrupted, or the endpoint gone: start no new task (those
            for future in futures:  # under way finish and are logged)
                future.cancel()
            raise
