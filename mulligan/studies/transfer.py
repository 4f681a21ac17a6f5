"""A transfer study (`bench TEST_SUITE --learn-on TRAIN`): learn on one split, prove it on
another.

The learning phase runs the learner (reflexion-memory) over the training tasks as a run of
its own, `RUN_ID-learn`, in the same log, so it resumes as any run does; the curator makes
what it stored a playbook (once: a resume finds the curation in the log); each of its
candidate lessons is verified, paired on the training tasks it is retrieved for (bench/
verify.py, run `RUN_ID-verify`); the test phase is the ordinary paired study over the test
tasks, with the memory frozen unless `keep_learning`. Training and test tasks never overlap.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mulligan import strategies as registry
from mulligan.errors import UserError
from mulligan.llm.base import ChatModel
from mulligan.memory.curator import Curator, CuratorSettings, curation_of, lessons_written_by
from mulligan.runs.build import loop_settings
from mulligan.runs.lifecycle import lifecycle
from mulligan.schema import Task
from mulligan.studies.study import OnEpisode, Study
from mulligan.studies.verify import Verification, verify, verify_run_id
from mulligan.tasks.files import TASK_SUFFIXES, load_task_path

SAMPLE = "sample:"


def learn_run_id(run_id: str) -> str:
    """The learning phase's run, beside the study's own in the log."""
    return f"{run_id}-learn"


def curation_tag(run_id: str) -> str:
    """What the curator's lesson events are logged under."""
    return f"{learn_run_id(run_id)}:curator"


def training_split(spec: str, suite: list[Task], test: list[Task], seed: int) -> list[Task]:
    """The training tasks `--learn-on` names: `sample:N` (a seeded sample of the suite's
    tasks outside the test selection), a task file or directory, or comma-separated ids of
    the suite. Refused when they overlap the test tasks or share no family with them."""
    test_ids = {task.id for task in test}
    spec = spec.strip()
    if spec.startswith(SAMPLE):
        train = _sample(spec, [task for task in suite if task.id not in test_ids], seed)
    elif Path(spec).expanduser().exists():
        train = load_task_path(Path(spec).expanduser())
    else:
        train = _by_ids(spec, suite)
    overlap = [task.id for task in train if task.id in test_ids]
    if overlap:
        raise UserError(
            f"--learn-on: {len(overlap)} task(s) are in both the training and the test "
            f"selection: {', '.join(overlap)}; choose disjoint tasks (sample:N draws only "
            "from the tasks outside the test selection)"
        )
    families = sorted({task.family for task in test})
    if not {task.family for task in train} & set(families):
        raise UserError(
            f"--learn-on: no training task is of a test task's family ({', '.join(families)}): "
            "lessons are retrieved within a family, so none could reach a test task; "
            "learn on tasks of the same suite"
        )
    return train


def _sample(spec: str, rest: list[Task], seed: int) -> list[Task]:
    size = spec.removeprefix(SAMPLE)
    if not size.isdigit() or int(size) < 1:
        raise UserError(f"--learn-on {spec}: write sample:N with N a whole number above 0")
    if int(size) > len(rest):
        raise UserError(
            f"--learn-on {spec}: only {len(rest)} tasks of the suite are outside the test "
            f"selection; pass sample:{len(rest)} or fewer"
        )
    return random.Random(f"learn-on:{seed}").sample(rest, int(size))


def _by_ids(spec: str, suite: list[Task]) -> list[Task]:
    ids = [part.strip() for part in spec.split(",") if part.strip()]
    by_id = {task.id: task for task in suite}
    missing = [i for i in ids if i not in by_id]
    if len(ids) == 1 and missing and Path(spec).suffix in TASK_SUFFIXES:
        raise UserError(
            f"--learn-on {spec}: no such file (nor a task id of this suite); give a task file "
            "or directory that exists, task ids, or sample:N"
        )
    if missing or not ids:
        raise UserError(
            f"--learn-on: unknown task id(s) {', '.join(missing) or '(none given)'} in this "
            "suite; give ids that `mulligan tasks SUITE` lists, a task file or directory, "
            "or sample:N"
        )
    return [by_id[i] for i in dict.fromkeys(ids)]


@dataclass(frozen=True)
class Transfer:
    """What the learning phase is: its tasks, the curator's settings, and whether the test
    phase goes on learning."""

    spec: str
    tasks: list[Task]
    keep_learning: bool = False
    curator: CuratorSettings = field(default_factory=CuratorSettings)

    def manifest(self) -> dict[str, Any]:
        """Both selections and the mode go into the study's manifest (a resume must match)."""
        return {
            "learn_on": self.spec,
            "learn_tasks": [task.id for task in self.tasks],
            "keep_learning": self.keep_learning,
            "lesson_budget": self.curator.token_budget,
            "merge_similarity": self.curator.merge_similarity,
        }


def check_test_strategies(names: list[str], keep_learning: bool) -> None:
    """The test phase compares the tasks with the memory and without: it needs an arm of
    each, and a frozen memory has no arm that writes it."""
    chosen = [registry.get(name) for name in names]
    writers = [s.name for s in chosen if s.writes_store]
    if writers and not keep_learning:
        raise UserError(
            f"--learn-on: {', '.join(writers)} writes the memory, which the test phase keeps "
            "frozen; use memory-frozen, or pass --keep-learning"
        )
    if not any(s.uses_store for s in chosen) or all(s.uses_store for s in chosen):
        raise UserError(
            "--learn-on: the test phase needs a strategy with the memory (memory-frozen, or "
            "reflexion-memory with --keep-learning) and one without (react, reflexion)"
        )


class TransferStudy:
    """The learning phase, the curator, then the test phase: one run a report describes."""

    def __init__(self, study: Study, transfer: Transfer, curator_model: ChatModel | None):
        self.transfer, self.curator_model = transfer, curator_model
        self.study = replace(study, info={**study.info, **transfer.manifest()})
        self.memory, self.tasks = self.study.memory, self.study.tasks
        self.learned = False

    def manifest(self) -> dict[str, Any]:
        return self.study.manifest()

    def learner(self) -> Study:
        """The learning phase as a study of its own over the training tasks."""
        return replace(
            self.study,
            tasks=self.transfer.tasks,
            strategies=[registry.LEARNER],
            passes=1,
            first_from=None,
            info={**self.study.info, "phase": "learning"},
        )

    def learn(self, run_id: str, on_episode: OnEpisode | None = None) -> None:
        """The learning phase, then the curator; the memory frozen after, unless the test
        phase keeps learning. What the log already has (finished episodes, the curation) is
        read back, not made again."""
        learner, learning, log = self.learner(), learn_run_id(run_id), self.memory.log
        with lifecycle(log, learning, learner.manifest(), resume=log.run(learning) is not None):
            learner.run(learning, on_episode)
        self.curate(run_id)
        self.verify(run_id)
        if not self.transfer.keep_learning:
            self.memory.freeze()
        self.learned = True

    def run(self, run_id: str, on_episode: OnEpisode | None = None) -> None:
        """The test phase (after the learning phase, if this process has not run it yet)."""
        if not self.learned:
            self.learn(run_id)
        self.study.run(run_id, on_episode)

    def verify(self, run_id: str) -> Verification:
        """The playbook's candidates, each paired on the training tasks it is retrieved for
        (studies/verify.py): only what helped there reaches the test tasks."""
        curation = curation_of(self.memory.log, curation_tag(run_id))
        kept = self.memory.lessons([x.id for x in curation.kept]) if curation else []
        study, checking = self.study, verify_run_id(run_id)
        settings = loop_settings(study.config, registry.LEARNER)
        log, wanted = self.memory.log, {**self.manifest(), "phase": "verification"}
        with lifecycle(log, checking, wanted, resume=log.run(checking) is not None):
            return verify(
                self.memory, kept, self.transfer.tasks,
                lambda strategy: study._loop(strategy, checking, trials=1), checking,
                k=settings.retrieved_lessons, min_similarity=settings.min_similarity,
                pairs=study.config.memory.verify_pairs, concurrency=study.config.run.concurrency,
            )  # fmt: skip

    def curate(self, run_id: str) -> None:
        tag = curation_tag(run_id)
        if curation_of(self.memory.log, tag) is not None:
            return  # made before a resume
        lessons = lessons_written_by(self.memory.log, learn_run_id(run_id))
        curator = Curator(self.memory, self.curator_model, self.transfer.curator)
        curator.curate(lessons, {task.id: task for task in self.transfer.tasks}, tag)
