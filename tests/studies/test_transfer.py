"""`bench --learn-on`: a learning phase on one split, a test phase on another with the memory
frozen, paired against the same tasks without it; the report answers whether it transferred."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mulligan import prompts
from mulligan.cli import main
from mulligan.errors import UserError
from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.curator import estimated_tokens
from mulligan.memory.log import EpisodeLog
from mulligan.report.stats import collect
from mulligan.schema import Episode
from mulligan.studies import demo
from mulligan.studies.transfer import learn_run_id, training_split
from mulligan.tasks.files import load_task_path
from mulligan.testing import FakeOpenAIServer

FAMILY = {"units": "units", "easy": "arithmetic"}
TASKS = "\n".join(
    f'- id: {t.id.removeprefix("demo/")}\n  family: {FAMILY[t.kind]}\n  prompt: "{t.prompt}"\n'
    f"  checks: [{{type: exact_match, answer: '{t.answer}'}}]"
    for t in demo.DEMO_TASKS
    if t.kind in FAMILY
)
TRAIN, TEST = "units-1,units-2", "units-3,units-4,easy-1,easy-2"


def run_ids(text: str) -> list[str]:
    return re.findall(r"run id: (\w+)", text)


def bench(
    server: FakeOpenAIServer, tasks: Path, out: Path, *extra: str, test: str = TEST
) -> list[str]:
    return [
        "bench", str(tasks), "--ids", test, "--trials", "3", "--temperature", "0.7",
        "--base-url", server.base_url, "--out", str(out), "--embedding", "hash",
        "--validate-after", "1",  # two training tasks give a lesson one pair to be verified on
        *extra,
    ]  # fmt: skip


def learned(tasks: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, EpisodeLog]:
    """A transfer study on the demo's units tasks: its run id and episode log."""
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        assert main(bench(server, tasks, out, "--learn-on", TRAIN)) == 0
        assert server.violations == []
    return run_ids(capsys.readouterr().err)[0], EpisodeLog(out / "memory" / "episodes.db")


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "units.yaml"
    path.write_text(TASKS)
    return path


def test_lessons_learned_on_the_training_split_reach_the_test_tasks_and_none_is_written_there(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        assert main(bench(server, tasks, out, "--learn-on", TRAIN)) == 0
        assert server.violations == []
    run_id = run_ids(capsys.readouterr().err)[0]
    memory = Memory(out / "memory", HashEmbedding())
    log = memory.log
    learned = {e["task_id"]: e for e in log.episodes(learn_run_id(run_id))}
    assert sorted(learned) == ["units-1", "units-2"]
    # the units lesson, written on units-1, kept by the curator (beside the cases of the two)
    (lesson,) = [x for x in memory.store.all() if x.kind != "case"]
    assert lesson.validity.status == "validated"  # verified on units-2: it helped there
    assert lesson.source.task_id in learned and lesson.text == demo.UNITS_LESSON
    tested = {(e["strategy"], e["task_id"]): e["id"] for e in log.episodes(run_id)}
    for task in ("units-3", "units-4"):
        first = log.episode(tested[("memory-frozen", task)]).attempts[0]  # type: ignore[union-attr]
        assert first.lesson_ids == [lesson.id]
    # nothing written in the test phase: no stored lesson created, reinforced or changed
    test_events = [e for e in log.lesson_events() if e["episode_id"] in set(tested.values())]
    created = [e["lesson_id"] for e in test_events if e["event"] in ("created", "reinforced")]
    assert log.stored_ids(created) == set() and memory.store.count() == 3  # and two cases
    uses = sorted(e["event"] for e in test_events if e["lesson_id"] == lesson.id)
    assert uses == ["helped", "helped", "retrieved", "retrieved"]
    before = [e for e in log.lesson_events(lesson.id) if e["episode_id"] not in tested.values()]
    assert memory.lessons([lesson.id])[0].validity.retrieved == sum(
        e["event"] in ("retrieved", "shown") for e in before
    )  # frozen: the test phase's uses are logged, not counted (learning: retrieved, or shown
    # to an attempt by assignment while working)
    manifest = collect(log, run_id).manifest
    assert manifest["learn_on"] == TRAIN and manifest["keep_learning"] is False
    assert manifest["learn_tasks"] == ["units-1", "units-2"]
    assert sorted(manifest["task_order"]) == sorted(TEST.split(","))


def test_the_transfer_table_matches_a_hand_count(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """react: the two easy tasks; reflexion: the units tasks too, at trial 2 (its diagnosis);
    memory-frozen: all four at trial 1 (the lesson learned on units-1)."""
    out = tmp_path / "out"
    run_id, log = learned(tasks, out, capsys)
    counts = {s.label: s.solved_by_trial for s in collect(log, run_id).strategies}
    assert counts == {"react": [2, 2, 2], "reflexion": [2, 4, 4], "memory-frozen": [4, 4, 4]}
    report = (out / "report.md").read_text()
    assert "## Transfer: learned on 2 tasks, tested on 4 others" in report
    # a candidate reaches no prompt: units-2 does not see the lesson units-1 wrote
    learning = "| learning phase (reflexion-memory) | 2 | 0/2 = 0% [0–66] | 2/2 = 100% [34–100] |"
    assert learning in report
    # with the memory against without, task by task: submitted answer, then trial 1
    assert "| reflexion | memory-frozen | 4 | 4 | 0 | 0 | 0 | 1.000 | +0 pts [+0, +0] |" in report
    # trial 1 on the tasks the memory showed something: the two units tasks
    trial_1 = (
        "| react, trial 1 | memory-frozen, trial 1 (shown memory) | 2 | 0 | 0 | 2 | 0 | 0.500 |"
    )
    assert trial_1 in report
    assert "| playbook | 1 |" in report and "| before the curator | 1 |" in report
    text = demo.UNITS_LESSON
    assert re.search(rf"\| {re.escape(text)} \| units-1 \| 2 \| 2 \| 0 \|", report), report
    block = estimated_tokens(prompts.render("lessons", lessons=[text]))  # 191 characters
    assert f"Lessons add {block} tokens to each prompt of memory-frozen that had any" in report
    # the lesson had one pair, on units-2, whose attempt without it failed: noise alone could
    # not have moved it either way
    luck = "paired on 1 task(s) that passed 0% of the time without a lesson, is validated by "
    assert luck + "chance 0% of the time and refuted 0%" in report


def test_overlapping_splits_are_refused_with_the_ids_that_overlap(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", str(tasks), "--ids", "units-3,units-4", "--learn-on", "units-2,units-3"]
    argv += ["--out", str(tmp_path / "out"), "--embedding", "hash"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "units-3" in err and "units-2" not in err
    assert "--learn-on" in err and not (tmp_path / "out").exists()


def test_a_training_split_by_file_by_ids_or_by_seeded_sample(tmp_path: Path, tasks: Path) -> None:
    suite = load_task_path(tasks)
    test = [t for t in suite if t.id in ("units-3", "units-4")]
    assert [t.id for t in training_split(TRAIN, suite, test, seed=0)] == ["units-1", "units-2"]
    sampled = training_split("sample:3", suite, test, seed=1)
    assert len(sampled) == 3 and not {t.id for t in sampled} & {"units-3", "units-4"}
    assert sampled == training_split("sample:3", suite, test, seed=1)
    other = tmp_path / "other.yaml"
    other.write_text(TASKS.replace("units-1", "fresh-1"))
    by_file = training_split(str(other), suite, [t for t in suite if t.id == "units-1"], seed=0)
    assert "fresh-1" in [t.id for t in by_file]
    with pytest.raises(UserError, match="sample:9.*5 tasks"):
        training_split("sample:9", suite, test, seed=1)
    with pytest.raises(UserError, match="unknown task id.*nope"):
        training_split("units-1,nope", suite, test, seed=1)
    with pytest.raises(UserError, match="no training task.*family"):
        training_split("easy-1", suite, test, seed=1)
    with pytest.raises(UserError, match=r"--learn-on train\.yaml: no such file"):
        training_split("train.yaml", suite, test, seed=1)  # a typo'd file is named as a file


def test_a_transfer_study_resumes_its_learning_phase_and_refuses_another_split(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    finish = Memory.finish_episode

    def ctrl_c_after_the_first_learning_episode(self: Memory, episode: Episode) -> None:
        finish(self, episode)
        if "-learn:" in episode.id:
            raise KeyboardInterrupt

    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        flags = bench(server, tasks, out, "--learn-on", TRAIN)
        with monkeypatch.context() as patched:
            patched.setattr(Memory, "finish_episode", ctrl_c_after_the_first_learning_episode)
            assert main(flags) == 130
        run_id = run_ids(capsys.readouterr().err)[0]
        log = EpisodeLog(out / "memory" / "episodes.db")
        assert log.run(learn_run_id(run_id))["status"] == "interrupted"  # type: ignore[index]
        finished = [e["task_id"] for e in log.episodes(learn_run_id(run_id)) if e["ended_at"]]
        assert len(finished) == 1 and log.episodes(run_id) == []
        prompt = next(t.prompt for t in demo.DEMO_TASKS if t.id.endswith(finished[0]))
        made = len(server.requests)
        assert main([*flags, "--resume", run_id]) == 0
        assert not [r for r in server.requests[made:] if prompt in json.dumps(r)]
        done = len(server.requests)
        assert main([*flags, "--resume", run_id]) == 0
        assert len(server.requests) == done  # a finished study resumes to the same report
        other = bench(server, tasks, out, "--learn-on", "units-1")
        assert main([*other, "--resume", run_id]) == 2
    assert "learn_on" in capsys.readouterr().err
    counts = {s.label: s.solved_by_trial for s in collect(log, run_id).strategies}
    assert counts == {"react": [2, 2, 2], "reflexion": [2, 4, 4], "memory-frozen": [4, 4, 4]}


def test_a_logged_validity_rule_todays_rules_refuse_leaves_out_the_chance_line_and_says_why(
    tmp_path: Path, tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    run_id, log = learned(tasks, out, capsys)
    manifest = collect(log, run_id).manifest
    manifest["config"]["validity"]["validate_after"] = 0  # as a hand-edited log might hold
    log.db["runs"].update(run_id, {"manifest": json.dumps(manifest)})
    again = tmp_path / "again"
    assert main(["report", run_id, "--memory", str(out / "memory"), "--out", str(again)]) == 0
    report = (again / "report.md").read_text()
    assert "## Transfer: learned on 2 tasks, tested on 4 others" in report
    assert "is validated by chance" not in report
    assert "validity.validate_after" in report and "no chance is given" in report
