"""Lesson counters: no lost update across processes or threads, status from the true counts,
and counter updates that never re-embed a lesson."""

from __future__ import annotations

import concurrent.futures
import itertools
import math
import subprocess
import sys
from pathlib import Path

import pytest

from mulligan.memory import HashEmbedding, Memory, ValiditySection
from mulligan.memory.validity import (
    apply_evidence,
    apply_outcome,
    by_chance,
    by_chance_while_working,
    settle,
)
from mulligan.schema import (
    Attempt,
    Episode,
    Lesson,
    LessonScope,
    LessonSource,
    Task,
)
from tests.helpers.verdicts import seen

# a hang guard only: these tests start several processes, slow on a loaded machine
pytestmark = pytest.mark.timeout(600)

TEXTS = {
    "hurts": "Answer capital questions with the largest city of the country.",
    "helps": "Check the official government seat before naming a capital city.",
    "mixed": "Prefer one-word answers when the question asks for one word only.",
}


def seeded(directory: Path, embedder: HashEmbedding | None = None) -> Memory:
    memory = Memory(directory, embedder or HashEmbedding())
    for lesson_id, text in TEXTS.items():
        lesson = Lesson(
            id=lesson_id,
            text=text,
            scope=LessonScope(family="capitals"),
            source=LessonSource(task_id="elsewhere", model="human"),
        )
        assert memory.keep(lesson, persistent=True).id == lesson_id
    return memory


def outcome(memory: Memory, given: list[Lesson], passed: bool, episode_id: str) -> None:
    """What the loop does after a verdict: log the attempt, count help or harm."""
    episode = Episode(id=episode_id, task_id="t", strategy="reflexion-memory")
    memory.start_episode(episode)
    attempt = Attempt(task_id="t", trial=1, lesson_ids=[lesson.id for lesson in given])
    memory.finish_attempt(episode, attempt, seen(passed), given)


def verified_pair(
    memory: Memory, lesson: Lesson, *, helped: bool, hurt: bool, episode_id: str
) -> None:
    """What verification does with one pair: the evidence, where counters live."""

    def add(fresh: Lesson) -> list[str]:
        if fresh.validity.status not in ("candidate", "validated"):
            return []
        apply_evidence(fresh, "t", helped, hurt)
        status = settle(fresh, memory.rules)
        return [f"status:{status}"] if status else []

    memory.change([lesson], "verified", add, episode_id=episode_id, trial=1, once=True)


HAMMER = """
import sys
from mulligan.memory import HashEmbedding, Memory
from mulligan.schema import Attempt, CheckResult, Episode, Verdict


def seen(passed):
    check = CheckResult(type="exact_match", name="answer", passed=passed, score=float(passed))
    return Verdict(passed=passed, score=float(passed), checks=[check])


memory = Memory(sys.argv[1], HashEmbedding())
name, rounds = sys.argv[2], int(sys.argv[3])
hurts, helps, mixed = memory.lessons(["hurts", "helps", "mixed"])  # loaded once: stale later
for n in range(rounds):
    for passed, given in ((True, [helps] + [mixed] * (n % 2)), (False, [hurts] + [mixed] * (1 - n % 2))):
        episode = Episode(id=f"{name}-{n}-{passed}", task_id="t", strategy="reflexion-memory")
        memory.start_episode(episode)
        attempt = Attempt(task_id="t", trial=1, lesson_ids=[x.id for x in given])
        memory.finish_attempt(episode, attempt, seen(passed), given)
"""


def replayed_status(memory: Memory, lesson_id: str) -> str:
    """The status the lesson's helped/hurt events give when replayed in the log's order."""
    lesson = Lesson(id=lesson_id, text="x")
    for event in memory.log.lesson_events(lesson_id):
        if event["event"] in ("helped", "hurt"):
            apply_outcome(lesson, event["event"] == "helped")
    return lesson.validity.status


def assert_every_update_counted(memory: Memory, updates: int) -> None:
    hurts, helps, mixed = memory.lessons(["hurts", "helps", "mixed"])
    assert hurts.validity.hurt == updates and hurts.validity.helped == 0
    assert helps.validity.helped == updates and helps.validity.hurt == 0
    assert mixed.validity.helped + mixed.validity.hurt == updates
    # online counters decide nothing: only verification moves a status
    assert hurts.validity.status == helps.validity.status == "candidate"
    assert mixed.validity.status == replayed_status(memory, "mixed") == "candidate"
    events = [e["event"] for e in memory.log.lesson_events("hurts")]
    assert events.count("hurt") == updates and events.count("status:refuted") == 0
    # the store's copy (a cache) says the same as the log
    cached = {lesson.id: lesson.validity for lesson in memory.store.get(list(TEXTS))}
    for lesson in (hurts, helps, mixed):
        assert cached[lesson.id] == lesson.validity


def test_three_processes_sharing_one_memory_lose_no_counter_update(tmp_path: Path) -> None:
    seeded(tmp_path / "mem")
    rounds = 16
    hammers = [
        subprocess.Popen(
            [sys.executable, "-c", HAMMER, str(tmp_path / "mem"), name, str(rounds)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b", "c")
    ]
    for hammer in hammers:
        _, err = hammer.communicate(timeout=300)
        assert hammer.returncode == 0, err
    assert_every_update_counted(Memory(tmp_path / "mem", HashEmbedding()), 3 * rounds)


def test_four_threads_in_one_process_lose_no_counter_update(tmp_path: Path) -> None:
    seeded(tmp_path / "mem")
    memory = Memory(tmp_path / "mem", HashEmbedding())  # as a new run: its threads open the store
    rounds = 40

    def one(n: int) -> None:
        # each loop holds its own copies, as a retrieval gives them
        hurts, helps, mixed = memory.store.get(["hurts", "helps", "mixed"])
        outcome(memory, [helps] + [mixed] * (n % 2), True, f"p{n}")
        outcome(memory, [hurts] + [mixed] * (1 - n % 2), False, f"f{n}")

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(rounds)))
    assert_every_update_counted(memory, rounds)
    assert_every_update_counted(Memory(tmp_path / "mem", HashEmbedding()), rounds)


def test_a_refuted_lesson_never_comes_back(tmp_path: Path) -> None:
    memory = seeded(tmp_path / "mem")
    stale = memory.lessons(["hurts"])[0]  # a copy taken while it was still a candidate
    verified_pair(memory, memory.lessons(["hurts"])[0], helped=False, hurt=True, episode_id="v0")
    assert memory.lessons(["hurts"])[0].validity.status == "refuted"
    for n in range(5):  # helps counted, or verified, on an old copy cannot revive it
        outcome(memory, [stale], True, f"p{n}")
        verified_pair(memory, stale, helped=True, hurt=False, episode_id=f"v{n + 1}")
    lesson = memory.lessons(["hurts"])[0]
    assert lesson.validity.status == "refuted" and lesson.validity.helped == 5
    assert lesson.validity.evidence.hurt == 1 and lesson.validity.evidence.helped == 0
    assert memory.store.get(["hurts"])[0].validity.status == "refuted"
    task = Task(id="q", family="capitals", prompt=TEXTS["hurts"], checks=[])
    assert "hurts" not in [found.id for found in memory.retrieve(task, 3)]
    # even a stale cache entry in the store does not bring it back
    memory.store.put([stale])
    assert "hurts" not in [found.id for found in memory.retrieve(task, 3)]


class CountingEmbedding(HashEmbedding):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return super().embed(texts)


def test_counter_and_status_updates_embed_nothing(tmp_path: Path) -> None:
    embedder = CountingEmbedding()
    memory = seeded(tmp_path / "mem", embedder)
    memory.rules = ValiditySection(validate_after=2, refute_after=3)
    lessons = memory.lessons(list(TEXTS))
    before = list(embedder.texts)
    for n in range(4):
        outcome(memory, lessons, n % 2 == 0, f"e{n}")
    memory.supersede(lessons[2], "helps", "e9", 1)
    memory.retract("hurts")
    assert embedder.texts == before  # nothing re-embedded
    cached = {lesson.id: lesson.validity for lesson in memory.store.get(list(TEXTS))}
    assert cached["helps"].helped == 2 and cached["helps"].hurt == 2
    assert cached["hurts"].status == "retracted" and cached["mixed"].status == "superseded"
    task = Task(id="q", family="capitals", prompt="Which city is the capital?", checks=[])
    found = memory.retrieve(task, 3)
    assert embedder.texts == [*before, task.prompt]  # the query, and nothing else
    assert [lesson.id for lesson in found] == ["helps"]
    assert memory.store.get(["helps"])[0].validity.retrieved == 1


@pytest.mark.parametrize(
    ("pairs", "pass_rate", "with_rate", "rules", "validated", "refuted"),
    [
        # one pair at even odds: helped 1/4, hurt 1/4, the same 1/2
        (1, 0.5, None, ValiditySection(), 0.0, 0.25),
        (1, 0.5, None, ValiditySection(validate_after=1), 0.25, 0.25),
        # two pairs that must both help: (1/4)^2; refuted when hurt in either and not
        # helped in the other: 2 * 1/4 * 1/2 + (1/4)^2
        (2, 0.5, None, ValiditySection(), 1 / 16, 5 / 16),
        # a lesson that always helps a task that never passes alone
        (3, 0.0, 1.0, ValiditySection(validate_after=3), 1.0, 0.0),
        # a task that always passes: no pair can move the lesson
        (4, 1.0, None, ValiditySection(validate_after=1), 0.0, 0.0),
    ],
)
def test_the_chance_that_noise_alone_validates_a_lesson_matches_a_hand_count(
    pairs: int,
    pass_rate: float,
    with_rate: float | None,
    rules: ValiditySection,
    validated: float,
    refuted: float,
) -> None:
    luck = by_chance(pairs, pass_rate, rules, with_rate)
    assert luck.validated == pytest.approx(validated) and luck.refuted == pytest.approx(refuted)


def test_the_chances_agree_with_settle_on_every_sequence_of_pairs() -> None:
    """Enumerating every sequence of helped/hurt/same pairs through `settle` gives the same
    chances as `by_chance`'s counting."""
    rules = ValiditySection(validate_after=2, refute_after=1)
    helps = hurts = 0.3 * 0.7
    chance = {"validated": 0.0, "refuted": 0.0}
    for sequence in itertools.product(("helped", "hurt", "same"), repeat=3):
        lesson = Lesson(id="x", text="t", kind="insight", source=LessonSource(task_id="s"))
        p = 1.0
        for n, outcome in enumerate(sequence):
            apply_evidence(lesson, f"t{n}", outcome == "helped", outcome == "hurt")
            p *= helps if outcome == "helped" else hurts if outcome == "hurt" else 1 - 2 * helps
        settle(lesson, rules)
        if lesson.validity.status in chance:
            chance[lesson.validity.status] += p
    luck = by_chance(3, 0.3, rules)
    assert (luck.validated, luck.refuted) == pytest.approx((chance["validated"], chance["refuted"]))


@pytest.mark.parametrize("rules", [ValiditySection(), ValiditySection(validate_after=1)])
def test_the_chances_while_working_agree_with_settling_after_every_pair(
    rules: ValiditySection,
) -> None:
    """Every sequence of pairs, settled after each and stopped once the lesson is no longer a
    candidate, gives the chances `by_chance_while_working` computes."""
    pass_rate, pairs = 0.3, 4
    odds = {"helped": 0.21, "hurt": 0.21, "same": 0.58}  # p(1 - p) each way at p = 0.3
    chance = {"validated": 0.0, "refuted": 0.0}
    for sequence in itertools.product(odds, repeat=pairs):
        lesson = Lesson(id="x", text="t", kind="insight", source=LessonSource(task_id="s"))
        for n, outcome in enumerate(sequence):
            if lesson.validity.status != "candidate":
                break  # settled: the rest of the sequence makes no pair
            apply_evidence(lesson, f"t{n}", outcome == "helped", outcome == "hurt")
            settle(lesson, rules)
        if lesson.validity.status in chance:
            chance[lesson.validity.status] += math.prod(odds[o] for o in sequence)
    luck = by_chance_while_working(pairs, pass_rate, rules)
    assert (luck.validated, luck.refuted) == pytest.approx((chance["validated"], chance["refuted"]))


@pytest.mark.parametrize(("pairs", "pass_rate"), [(0, 0.5), (0, 0.0), (5, 0.0), (5, 1.0)])
def test_no_pair_or_a_task_that_always_or_never_passes_settles_nothing_by_chance(
    pairs: int, pass_rate: float
) -> None:
    luck = by_chance_while_working(pairs, pass_rate, ValiditySection(validate_after=1))
    assert (luck.validated, luck.refuted) == (0.0, 0.0)


@pytest.mark.parametrize(("pairs", "pass_rate"), [(3, 1.5), (3, -0.2), (-1, 0.5)])
def test_a_chance_asked_of_an_impossible_pass_rate_or_count_is_a_bug_that_raises(
    pairs: int, pass_rate: float
) -> None:
    for chances in (by_chance, by_chance_while_working):
        with pytest.raises(ValueError, match="pass rate|pairs"):
            chances(pairs, pass_rate, ValiditySection())


def test_a_misspelt_filter_of_a_lesson_change_is_refused_at_the_call(tmp_path: Path) -> None:
    """The filters of a change are parameters by name, not `**where` passed on: a type checker
    reads every caller's keywords (mypy names a misspelt one), and at run time a misspelt one
    is a TypeError at the call, before anything is changed."""
    import inspect

    memory = seeded(tmp_path / "m")
    lesson = memory.lessons(["helps"])[0]
    for change in (memory.change, memory.log.change_lessons):
        kinds = {p.kind for p in inspect.signature(change).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD not in kinds, change
        with pytest.raises(TypeError, match="episod_id"):
            change([lesson], "helped", lambda lesson: [], episod_id="e1", trial=2)  # type: ignore[call-arg]
    assert memory.lessons(["helps"])[0].validity == lesson.validity
