"""A hostile review of the study's numbers: small runs whose report is computed by hand, and
the promises about sharing trial 1, resuming and freezing the memory."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.llm.base import ChatResponse
from mulligan.memory import HashEmbedding, Memory
from mulligan.report.cells import episode_ids
from mulligan.report.report import write_report
from mulligan.report.stats import collect
from mulligan.runs.lifecycle import check_resume
from mulligan.schema import Attempt, CheckResult, ExactMatchCheck, Task, Usage, Verdict
from mulligan.settings.run_config import LoopSection, MemorySection, RunConfig
from mulligan.studies.study import Study
from mulligan.studies.transfer import Transfer, TransferStudy
from mulligan.testing import FakeOpenAIServer, FakeReply, ScriptedModel
from tests.helpers.logged_runs import log_run
from tests.studies.test_paper import is_reflection

ACTOR, REFLECTOR = (
    Usage(prompt_tokens=90, completion_tokens=10),
    Usage(prompt_tokens=8, completion_tokens=2),
)


def verdict(visible: bool, hidden: bool) -> Verdict:
    checks = [
        CheckResult(type="t", name="v", passed=visible, score=float(visible)),
        CheckResult(type="t", name="h", visibility="hidden", passed=hidden, score=float(hidden)),
    ]
    return Verdict(passed=visible and hidden, score=float(visible and hidden), checks=checks)


def charged(trial: int, last: bool) -> Attempt:
    made = Attempt(task_id="", trial=trial, answer=f"answer {trial}")
    made.charge("actor", ACTOR)
    if not last:
        made.charge("reflector", REFLECTOR)
    return made


def logged(
    tmp_path: Path, made: dict[str, dict[str, list[tuple[bool, bool]]]], trials: int
) -> tuple[Memory, str]:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    runs = {
        s: {t: [verdict(*p) for p in ps] for t, ps in tasks.items()} for s, tasks in made.items()
    }
    order = list(next(iter(made.values())))
    config = {"strategies": list(made), "task_order": order, "seed": 0,
              "config": {"loop": {"trials": trials, "stop": "honest"}}}  # fmt: skip
    log_run(memory.log, "hand", config, runs, charged)
    return memory, "hand"


# ------------------------------------------------------------ success by trial budget


def test_a_task_solved_only_at_trial_3_counts_at_budget_3_only(tmp_path: Path) -> None:
    memory, run = logged(tmp_path, {"retry": {
        "late": [(False, False), (False, False), (True, True)],
        "first": [(True, True)],
        "never": [(False, False), (False, False), (False, False)],
    }}, trials=3)  # fmt: skip
    stats = write_report(memory.log, run, tmp_path / "out")
    (retry,) = stats.strategies
    assert retry.solved_by_trial == [1, 1, 2] and retry.any_by_trial == [1, 1, 2]
    assert retry.solved_at == {"late": 3, "first": 1, "never": None}
    # tokens: 100 an attempt, 10 a reflection, the reflection after the submitted one not counted
    # budget 1: 3 x 100; budget 2: 100 + 210 + 210; budget 3: 100 + 320 + 320
    assert retry.tokens_by_trial == [300, 520, 740]
    assert (retry.failed_first, retry.rescued, retry.later_trials) == (2, 1, 4)
    assert retry.tokens_per_success == 740 / 2
    text = (tmp_path / "out" / "report.md").read_text()
    assert (
        "| retry | 3 | 1/3 = 33% [6–79] | 1/3 = 33% [6–79] | 2/3 = 67% [21–94] | 2/3 = 67% [21–94] |"
        in text
    )
    assert "| late | solved (trial 3) |" in text and "| never | unsolved |" in text
    assert "| retry | 2 | 1/2 = 50% [9–91] | 4 | 0/4 = 0% [0–49] |" in text


def test_a_task_id_ending_like_a_later_pass_or_repeat_is_read_as_the_task(tmp_path: Path) -> None:
    tasks = {"a:pass2": [(True, True)], "b:repeat2": [(False, False)], "c": [(True, True)]}
    memory, run = logged(tmp_path, {"retry": tasks}, trials=1)
    stats = write_report(memory.log, run, tmp_path / "out")
    assert [(s.label, s.run_pass, s.tasks) for s in stats.strategies] == [("retry", 1, 3)]
    assert sorted(stats.strategies[0].units) == ["a:pass2", "b:repeat2", "c"]
    assert set(episode_ids(memory.log.episodes(run))) == {("retry", 1, t) for t in tasks}


# ------------------------------------------------------------ paired figures


def test_all_equal_paired_data_give_p_1_and_the_interval_0_0(tmp_path: Path) -> None:
    same = {"a": [(True, True)], "b": [(False, False)], "c": [(True, True)]}
    memory, run = logged(tmp_path, {"react": same, "retry": same}, trials=1)
    write_report(memory.log, run, tmp_path / "out")
    text = (tmp_path / "out" / "report.md").read_text()
    assert "| react | retry | 3 | 2 | 0 | 0 | 1 | 1.000 | +0 pts [+0, +0] | - |" in text


def test_paired_discordant_tasks_give_the_exact_binomial_p(tmp_path: Path) -> None:
    a = {t: [(False, False)] for t in "wxyz"}
    b = {t: [(True, True)] for t in "wxy"} | {"z": [(False, False)]}
    memory, run = logged(tmp_path, {"react": a, "retry": b}, trials=1)
    write_report(memory.log, run, tmp_path / "out")
    text = (tmp_path / "out" / "report.md").read_text()
    # 3 discordant, all for B: p = 2 / 2^3 = 0.25; B - A = +75 pts; the bootstrap mean of 4
    # draws from {1, 1, 1, 0}: P(<= 0.25) = 13/256 > 2.5%, so [+25, +100]; equal tokens: 0 extra
    assert "| react | retry | 4 | 0 | 0 | 3 | 1 | 0.250 | +75 pts [+25, +100] | 0 |" in text


# ------------------------------------------------------------ shared trial 1 and tokens


def scripted(learns: bool = False) -> ScriptedModel:
    """Never right; with `learns`, right on a "Learn" task once the lesson is in its prompt."""

    def policy(messages: list[dict[str, Any]], tools: Any) -> ChatResponse:
        if is_reflection(messages):
            lesson = {
                "diagnosis": "Say yes, not maybe.",
                "lesson": "When asked to say yes, answer exactly yes.",
            }
            return ChatResponse(text=json.dumps(lesson), usage=REFLECTOR)
        seen = json.dumps(messages)
        right = learns and "Learn" in seen and "answer exactly yes" in seen
        return ChatResponse(text="yes" if right else "maybe", usage=ACTOR)

    return ScriptedModel(policy=policy)


TASKS = [Task(id=f"t{i}", family="f", prompt=f"Task {i}: please say yes now.",
              checks=[ExactMatchCheck(answer="yes")]) for i in range(2)]  # fmt: skip


def study(directory: Path, model: ScriptedModel, strategies: list[str], trials: int = 2) -> Study:
    config = RunConfig(  # reflexion-memory learns online: its lessons are unverified
        loop=LoopSection(trials=trials, min_similarity=0.0),
        memory=MemorySection(show_candidates=True),
    )
    return Study(tasks=TASKS, strategies=strategies, model_for=lambda s: model,
                 memory=Memory(directory, HashEmbedding()), config=config)  # fmt: skip


@pytest.mark.parametrize("order", [["react", "reflexion"], ["reflexion", "react"]])
def test_a_shared_trial_1_counts_once_per_strategy_and_nothing_else_is_borrowed(
    tmp_path: Path, order: list[str]
) -> None:
    model = scripted()
    made = study(tmp_path, model, order)
    made.memory.log.start_run("r", made.manifest())
    made.run("r")
    assert (
        len(model.calls) == 2 + 2 * 2
    )  # trial 1 paid once per task; reflexion: reflection + trial 2
    by = {s.strategy: s for s in collect(made.memory.log, "r").strategies}
    # each strategy's figures include the shared trial 1 (its cost), never the other's later calls
    assert by["react"].prompt_tokens + by["react"].completion_tokens == 2 * 100
    assert "reflector" not in by["react"].by_role
    assert by["reflexion"].prompt_tokens + by["reflexion"].completion_tokens == 2 * 210
    assert by["react"].tokens_by_trial == [200, 200]
    assert by["reflexion"].tokens_by_trial == [200, 420]


# ------------------------------------------------------------ a crash and a resume


class Crash(KeyboardInterrupt):
    pass


def crashing(at: int) -> ScriptedModel:
    model, calls = scripted(), [0]
    planned = model.policy
    assert planned is not None

    def policy(messages: list[dict[str, Any]], tools: Any) -> Any:
        calls[0] += 1
        if calls[0] == at:
            raise Crash()
        return planned(messages, tools)

    model.policy = policy
    return model


def figures(directory: Path) -> tuple[dict[str, Any], collections.Counter[tuple[str, str, int]]]:
    memory = Memory(directory, HashEmbedding())
    found = {
        s.strategy: (s.tasks, s.attempts, s.prompt_tokens + s.completion_tokens, s.solved_by_trial,
                     s.tokens_by_trial, dict(s.lessons), {k: v.total_tokens for k, v in s.by_role.items()})
        for s in collect(memory.log, "r").strategies
    }  # fmt: skip
    events = collections.Counter(
        (e["event"], e["episode_id"], e["trial"]) for e in memory.log.lesson_events()
    )
    return found, events


def resume(study: Study, run_id: str) -> None:
    """A resumed study: refused unless its manifest is the run's own."""
    log = study.memory.log
    check_resume(log.run(run_id), run_id, study.manifest(), log.path)


def test_a_run_crashed_at_any_model_call_and_resumed_equals_one_that_never_crashed(
    tmp_path: Path,
) -> None:
    strategies = ["react", "reflexion", "reflexion-memory"]
    clean_model = scripted()
    clean = study(tmp_path / "clean", clean_model, strategies, trials=3)
    clean.memory.log.start_run("r", clean.manifest())
    clean.run("r")
    expected = figures(tmp_path / "clean")
    assert expected[0]["reflexion-memory"][5].get("retrieved")  # lessons were retrieved
    for at in range(1, len(clean_model.calls) + 1):
        first = study(tmp_path / f"at{at}", crashing(at), strategies, trials=3)
        first.memory.log.start_run("r", first.manifest())
        with pytest.raises(KeyboardInterrupt):
            first.run("r")
        again = study(tmp_path / f"at{at}", scripted(), strategies, trials=3)
        resume(again, "r")
        again.run("r")
        assert figures(tmp_path / f"at{at}") == expected, f"crashed at model call {at}"


def test_a_crash_after_a_reflection_kept_its_lessons_counts_no_lesson_event_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mulligan.memory.log import EpisodeLog

    def lessons(directory: Path) -> list[tuple[Any, ...]]:
        log = Memory(directory, HashEmbedding()).log
        found = [json.loads(r["record"]) for r in log.db.table("lessons").rows]
        return sorted(
            (x["text"], x["kind"], json.dumps(x["validity"]["reinforced"])) for x in found
        )

    clean = study(tmp_path / "clean", scripted(), ["reflexion-memory"], trials=3)
    clean.memory.log.start_run("r", clean.manifest())
    clean.run("r")
    written = EpisodeLog.keep_written

    def ctrl_c(self: EpisodeLog, *args: Any) -> None:  # lessons stored, none yet logged
        monkeypatch.setattr(EpisodeLog, "keep_written", written)
        raise Crash()

    monkeypatch.setattr(EpisodeLog, "keep_written", ctrl_c)
    first = study(tmp_path / "crashed", scripted(), ["reflexion-memory"], trials=3)
    first.memory.log.start_run("r", first.manifest())
    with pytest.raises(KeyboardInterrupt):
        first.run("r")
    again = study(tmp_path / "crashed", scripted(), ["reflexion-memory"], trials=3)
    resume(again, "r")
    again.run("r")
    expected, got = figures(tmp_path / "clean"), figures(tmp_path / "crashed")
    assert got[1] - expected[1] == collections.Counter(), "lesson events logged twice"
    assert lessons(tmp_path / "crashed") == lessons(tmp_path / "clean")


# ------------------------------------------------------------ the command line


TASK_FILE = (
    "- id: a\n  prompt: Say yes.\n  checks: [{type: exact_match, answer: 'yes'}]\n"
    "- id: b\n  prompt: Say yes.\n  checks: [{type: exact_match, answer: never}]\n"
)


def bench(
    tmp_path: Path, server: FakeOpenAIServer, out: str, *extra: str, tasks: str = TASK_FILE
) -> int:
    path = tmp_path / "t.yaml"
    path.write_text(tasks)
    return main(["bench", str(path), "--base-url", server.base_url, "--out", str(tmp_path / out),
                 "--embedding", "hash", *extra])  # fmt: skip


def run_id(err: str) -> str:
    return re.findall(r"run id: (\w+)", err)[0]


def always_yes(body: dict[str, Any]) -> FakeReply:
    return FakeReply(content="yes", usage=(90, 10))


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        (["--strategies", "react,retry", "--trials", "3"], "trials"),
        (["--strategies", "react,retry", "--model", "other-model"], "model"),
        (["--strategies", "react,reflexion"], "strategies"),
        (["--strategies", "retry,react"], "strategies"),  # the same strategies, another order
    ],
)
def test_a_resume_with_another_setting_is_refused_in_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changed: list[str], named: str
) -> None:
    with FakeOpenAIServer(policy=always_yes) as server:
        assert bench(tmp_path, server, "out", "--strategies", "react,retry", "--trials", "2") == 0
        run = run_id(capsys.readouterr().err)
        sent = len(server.requests)
        assert bench(tmp_path, server, "out", "--trials", "2", *changed, "--resume", run) == 2
        assert len(server.requests) == sent
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and named in err, err
    flags = re.findall(r"resume with the run's own (--[\w/-]+)", err)
    assert flags and flags[0] in ("--trials", "--model", "--strategy/--strategies"), err


def test_a_repeated_task_id_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As a task file with a repeated id is: the report would list the task twice."""
    with FakeOpenAIServer(policy=always_yes) as server:
        code = bench(tmp_path, server, "out", "--strategies", "react", "--ids", "a,a")
    assert code == 2 and "'a' given twice" in capsys.readouterr().err
    assert server.requests == []


def test_a_bench_over_no_task_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(policy=always_yes) as server:
        code = bench(tmp_path, server, "out", "--strategies", "react,retry", tasks="[]\n")
    err = capsys.readouterr().err
    assert code == 2, "a study of 0 tasks ran and reported 0 of 0"
    assert len(err.strip().splitlines()) == 1


def test_report_of_an_unknown_run_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(policy=always_yes) as server:
        assert bench(tmp_path, server, "out", "--strategies", "react,retry", "--trials", "2") == 0
    run = run_id(capsys.readouterr().err)
    before = (tmp_path / "out" / "report.md").read_text()
    assert main(["report", "nosuch", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nosuch" in err
    # the real run rebuilds byte for byte but for its "Generated at" line
    assert main(["report", run, "--out", str(tmp_path / "out")]) == 0
    after = (tmp_path / "out" / "report.md").read_text()
    generated = re.compile(r"^Generated at .*$", re.M)
    assert generated.sub("", after) == generated.sub("", before)


# ------------------------------------------------------------ --learn-on: a frozen memory


def test_the_test_phase_changes_no_stored_lesson(tmp_path: Path) -> None:
    train = [Task(id=f"l{i}", family="f", prompt=f"Learn {i}: please say yes now.",
                  checks=[ExactMatchCheck(answer="yes")]) for i in range(2)]  # fmt: skip
    model = scripted(learns=True)  # the lesson helps in training; every test attempt fails
    made = study(tmp_path, model, ["reflexion", "memory-frozen"], trials=3)
    transfer = TransferStudy(made, Transfer("l0,l1", train), model)
    transfer.study.memory.log.start_run("r", transfer.study.manifest())
    transfer.learn("r")
    log = made.memory.log
    stored = lambda: {r["id"]: (r["status"], json.loads(r["record"])["validity"])  # noqa: E731
                      for r in log.db.table("lessons").rows_where("stored = 1")}  # fmt: skip
    before = stored()
    assert before
    transfer.run("r")
    test_events = [e for e in log.lesson_events() if e["episode_id"].startswith("r:")]
    assert any(e["event"] == "retrieved" for e in test_events)  # the lessons were used
    assert stored() == before
    assert not {e["event"] for e in test_events} & {
        "reinforced",
        "status:refuted",
        "status:validated",
    }
