"""Episodes on a pool of Ray actors; the driver alone writes the episode log.

Each actor runs several episodes on threads (an episode mostly waits for the
endpoint). The loop factory is pickled on the driver with the driver's `Memory`
swapped for a `WorkerMemory`: a real `Memory` whose log forwards every call, as a
message, to the driver through a relay actor; the driver applies it to its log and
answers. With a chroma server (`--memory http://...`) workers open the lesson store
themselves; with an embedded one (one node only) store calls are forwarded too.
Messages coming back swap the worker's memory for the driver's again, so a lesson
change made on the worker runs against the driver's log in one transaction.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import math
import pickle
import threading
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import ray
from ray import cloudpickle

from mulligan.errors import UserError
from mulligan.inputs.memory_files import is_server
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.loop import Drawn, Loop
from mulligan.memory import Memory
from mulligan.schema import Episode, Task

POLL_SECONDS = 0.5
WRITES = {"log_step", "log_attempt", "start_episode", "lesson_event", "log_lesson"}
"""Log calls whose answer nobody reads: sent without waiting. Every other call waits for
the driver, so an episode's last write (`end_episode`) is applied before it returns."""


# ---------------------------------------------------------------- pickling across the wire


class _SwappingPickler(cloudpickle.CloudPickler):
    def __init__(self, file: io.BytesIO, swap: Callable[[object], Any]) -> None:
        super().__init__(file)
        self._swap = swap

    def reducer_override(self, obj: object) -> Any:
        swapped = self._swap(obj)
        return swapped if swapped is not None else super().reducer_override(obj)


def dumps(value: object, swap: Callable[[object], Any]) -> bytes:
    buffer = io.BytesIO()
    _SwappingPickler(buffer, swap).dump(value)
    return buffer.getvalue()


def _model_reduction(obj: object) -> Any:
    """An OpenAI client holds sockets: a worker opens its own with the same settings."""
    if type(obj) is not OpenAIChatModel:
        return None
    same = ("base_url", "temperature", "timeout", "max_retries", "backoff", "price")
    fields = {name: getattr(obj, name) for name in same}
    return partial(OpenAIChatModel, obj.name, api_key=obj._client.api_key, **fields), ()


_DRIVER_MEMORIES: dict[str, Memory] = {}
"""On the driver: the memory each run's messages refer to."""


def _driver_memory(token: str) -> Memory:
    return _DRIVER_MEMORIES[token]


# ---------------------------------------------------------------- the relay


@ray.remote(num_cpus=0)
class _Relay:
    """Workers' calls wait here until the driver has applied them and answered."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        self._waiting: dict[int, asyncio.Future[bytes]] = {}
        self._numbers = itertools.count()
        self._held: dict[str, dict[int, tuple[int, bytes]]] = {}
        self._expected: dict[str, int] = {}

    def _enqueue(self, sender: str, seq: int, item: tuple[int, bytes]) -> None:
        """In each sender's own order, whatever order Ray delivers them in."""
        held = self._held.setdefault(sender, {})
        held[seq] = item
        expected = self._expected.get(sender, 0)
        while expected in held:
            self._queue.put_nowait(held.pop(expected))
            expected += 1
        self._expected[sender] = expected

    async def call(self, sender: str, seq: int, message: bytes) -> bytes:
        number = next(self._numbers)
        self._waiting[number] = asyncio.get_running_loop().create_future()
        self._enqueue(sender, seq, (number, message))
        return await self._waiting[number]

    async def send(self, sender: str, seq: int, message: bytes) -> None:
        """A write nobody waits for, applied in order with the sender's calls."""
        self._enqueue(sender, seq, (-1, message))

    async def exchange(
        self, answers: list[tuple[int, bytes]], wait: float
    ) -> list[tuple[int, bytes]]:
        """The driver's answers to the last messages, for the next ones (one call a round)."""
        for number, reply in answers:
            if number >= 0:
                self._waiting.pop(number).set_result(reply)
        try:
            first = await asyncio.wait_for(self._queue.get(), wait)
        except asyncio.TimeoutError:
            return []
        taken = [first]
        while not self._queue.empty():
            taken.append(self._queue.get_nowait())
        return taken


class _Channel:
    """One worker memory's line to the driver: its messages keep the order they were sent."""

    def __init__(self, relay: Any, token: str) -> None:
        self.relay, self.token = relay, token
        self.sender = uuid.uuid4().hex
        self.numbers = itertools.count()


class _Forwarder:
    """On a worker: every method call becomes a message the driver applies to `target`."""

    def __init__(self, channel: _Channel, target: str) -> None:
        self._channel, self._target = channel, target

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        message = dumps((self._target, method, args, kwargs), self._back_to_driver)
        channel = self._channel
        seq = next(channel.numbers)
        if self._target == "log" and method in WRITES:
            channel.relay.send.remote(channel.sender, seq, message)  # steps as they happen
            return None
        reply = ray.get(channel.relay.call.remote(channel.sender, seq, message))
        ok, value = cloudpickle.loads(reply)
        if not ok:
            raise value
        return value

    def _back_to_driver(self, obj: object) -> Any:
        return (_driver_memory, (self._channel.token,)) if isinstance(obj, Memory) else None

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self._call(name, *args, **kwargs)


class _StoreForwarder(_Forwarder):
    def refresh(self, ids: list[str], current: Callable[[list[str]], list[Any]]) -> None:
        self._call("refresh", ids)  # the driver refreshes from its own log


class WorkerMemory(Memory):
    """The loop's memory on a worker: the log (and an embedded store) live on the driver."""

    def __init__(self, relay: Any, token: str, fields: dict[str, Any]) -> None:
        channel = _Channel(relay, token)
        forwarder: Any = _Forwarder(channel, "log")
        super().__init__(**fields, log=forwarder)
        if not fields.get("store"):  # embedded: the driver's process owns the directory
            self._store = _StoreForwarder(channel, "store")  # type: ignore[assignment]


def apply(memory: Memory, message: bytes) -> bytes:
    """On the driver: one forwarded call, applied to this process's log or store."""
    try:
        target, method, args, kwargs = cloudpickle.loads(message)
        if target == "log":
            value = getattr(memory.log, method)(*args, **kwargs)
        elif method == "refresh":
            value = memory.store.refresh(args[0], memory.log.lessons)  # type: ignore[func-returns-value]
        elif method == "get" and memory._store is None:
            value = []  # nothing was ever stored by this process: as on threads
        else:
            value = getattr(memory.store, method)(*args, **kwargs)
        return cloudpickle.dumps((True, value))
    except Exception as exc:  # raised again on the worker, where the call was made
        return cloudpickle.dumps((False, exc))


# ---------------------------------------------------------------- the workers


@ray.remote
class _EpisodeWorker:
    def __init__(self) -> None:
        self._local = threading.local()

    def run(
        self,
        key: str,
        recipe: bytes,
        task: Task,
        episode_id: str,
        position: int,
        drawn: Drawn | None = None,
    ) -> Episode:
        loops: dict[str, Loop] = self._local.__dict__.setdefault("loops", {})
        if key not in loops:  # one loop per thread and run, as on threads
            loops[key] = cloudpickle.loads(recipe)()
        return loops[key].run_episode(task, episode_id, position, drawn)


class RayExecutor:
    def __init__(self, address: str | None, *, concurrency: int) -> None:
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.concurrency = max(1, concurrency)
        self._workers: list[Any] = []
        self._relay: Any = None
        self._calls = itertools.count()
        self._failure: BaseException | None = None

    def node_count(self) -> int:
        return sum(1 for node in ray.nodes() if node.get("Alive"))

    def _pool(self) -> list[Any]:
        """Made once: as many actors as CPUs (at most `concurrency`), threads for the rest."""
        if not self._workers:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            size = max(1, min(self.concurrency, cpus))
            threads = math.ceil(self.concurrency / size)
            self._relay = _Relay.remote()  # type: ignore[attr-defined]
            self._workers = [
                _EpisodeWorker.options(  # type: ignore[attr-defined]
                    max_concurrency=threads,
                    num_cpus=1,
                    scheduling_strategy="SPREAD",
                    max_restarts=3,
                    max_task_retries=3,  # a lost worker's episode resumes from the log
                ).remote()
                for _ in range(size)
            ]
        return self._workers

    def run(
        self,
        make_loop: Callable[[], Loop],
        jobs: list[tuple[int, Task, str]],
        memory: Memory,
        concurrency: int,
        on_episode: Callable[[Task, Episode], None] | None,
        drawn: Callable[[Task], Drawn] | None = None,
    ) -> list[Episode]:
        """An episode for every (position, task, episode id), in order; finished ones are
        read back from the log, the others run on the workers while this process logs them.
        `drawn` gives a task's attempts already made (a paired study), read here, sent along."""
        workers = self._pool()
        token = f"run{next(self._calls)}"
        _DRIVER_MEMORIES[token] = memory
        try:
            recipe = ray.put(dumps(make_loop, self._to_worker(memory, token)))
        except (TypeError, pickle.PicklingError) as exc:
            del _DRIVER_MEMORIES[token]
            raise UserError(
                f"--executor ray: the loop cannot be sent to Ray workers ({exc}); tools from "
                "MCP servers and other live connections need --executor threads"
            ) from None
        results: dict[int, Episode] = {}

        def finished(index: int, task: Task, episode: Episode) -> None:
            results[index] = episode
            if on_episode:
                on_episode(task, episode)

        stop = threading.Event()
        service = threading.Thread(target=self._serve, args=(memory, stop), daemon=True)
        service.start()
        in_flight: dict[Any, tuple[int, Task, int]] = {}
        load = [0] * len(workers)
        try:
            waiting = list(enumerate(jobs))
            while waiting or in_flight:
                while waiting and len(in_flight) < concurrency:
                    index, (position, task, eid) = waiting.pop(0)
                    if memory.log.is_finished(eid):
                        done = memory.log.episode(eid)
                        assert done is not None
                        finished(index, task, done)
                        continue
                    worker = min(range(len(workers)), key=load.__getitem__)
                    load[worker] += 1
                    shared = drawn(task) if drawn else None  # read from the log here
                    ref = workers[worker].run.remote(token, recipe, task, eid, position, shared)
                    in_flight[ref] = (index, task, worker)
                if not in_flight:
                    continue
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                index, task, worker = in_flight.pop(ready[0])
                load[worker] -= 1
                try:
                    episode = ray.get(ready[0])
                except ray.exceptions.RayTaskError as exc:  # the worker's own, not Ray's wrapper
                    raise exc.cause from None
                finished(index, task, episode)
                if self._failure is not None:
                    raise self._failure
        finally:
            for ref in in_flight:  # an interrupted run: nothing more is written
                ray.cancel(ref, force=False)
            stop.set()
            service.join()
            del _DRIVER_MEMORIES[token]
        return [results[n] for n in range(len(jobs))]

    def _to_worker(self, memory: Memory, token: str) -> Callable[[object], Any]:
        location = memory._store_location
        fields = {
            "directory": str(memory.directory),
            "embedder": memory._embedder,
            "store": location if is_server(location) else None,
            "rules": memory.rules,
        }

        def swap(obj: object) -> Any:
            if obj is memory:
                return WorkerMemory, (self._relay, token, fields)
            return _model_reduction(obj)

        return swap

    def _serve(self, memory: Memory, stop: threading.Event) -> None:
        """The driver's one writer: apply workers' messages in the order they came."""
        answers: list[tuple[int, bytes]] = []
        while not stop.is_set() or answers:
            taken = ray.get(
                self._relay.exchange.remote(answers, 0 if stop.is_set() else POLL_SECONDS)
            )
            answers = [(number, apply(memory, message)) for number, message in taken]
            for number, reply in answers:
                ok, value = cloudpickle.loads(reply) if number < 0 else (True, None)
                if not ok and self._failure is None:  # raised by `run`, not lost
                    self._failure = value

    def close(self) -> None:
        for worker in self._workers:
            ray.kill(worker)
        if self._relay is not None:
            ray.kill(self._relay)
        self._workers, self._relay = [], None
