"""The selection strategy: N independent candidates, one submitted by execution evidence.
Dual agreement picks the cluster a hand count picks; with no test, output agreement; a
candidate that crashes on every input is never picked over one that runs; a task that is not
code goes by the majority of normalised answers; two tied finalists are separated by an input
the model writes; the episode's score is the submitted candidate's hidden verdict."""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Literal

from mulligan.evaluator.selector import Selector
from mulligan.evaluator.self_tests import with_self_tests
from mulligan.llm.base import Message
from mulligan.loop import LoopSettings
from mulligan.memory import HashEmbedding, Memory
from mulligan.report.stats import collect
from mulligan.runs.build import build_loop
from mulligan.schema import Episode, ExactMatchCheck, PythonTestsCheck, Task
from mulligan.settings.run_config import LoopSection, RunConfig
from mulligan.studies.study import Study
from mulligan.testing import ScriptedModel


def code(body: str) -> str:
    return f"```python\ndef f(x):\n    {body}\n```"


def inputs(*calls: object) -> str:
    return json.dumps({"inputs": [[c] for c in calls]})


def task(*visible: str, hidden: str = "assert f(3) == 6") -> Task:
    checks = [
        PythonTestsCheck(tests=t, entry_point="f", name=f"example {n}")
        for n, t in enumerate(visible, 1)
    ]
    checks.append(
        PythonTestsCheck(tests=hidden, entry_point="f", name="hidden", visibility="hidden")
    )
    return Task(
        id="double", family="code", prompt="Write f(x) that returns twice x.", checks=checks
    )


def run(
    replies: list[str],
    the_task: Task,
    trials: int = 3,
    separate: bool = False,
    stop_at_pass: bool = True,
    probes: Literal["auto", "always", "never"] = "always",
) -> tuple[Episode, ScriptedModel]:
    """`probes` always: these tests script the probe inputs as the first reply."""
    model = ScriptedModel(replies)
    settings = LoopSettings(
        strategy="select", trials=trials, separate=separate, stop_at_pass=stop_at_pass,
        probes=probes,
    )  # fmt: skip
    episode = build_loop(model, settings).run_episode(the_task)
    model.assert_done()
    return episode, model


def test_dual_agreement_picks_the_cluster_a_hand_count_picks() -> None:
    """Two tests. Trial 1 passes both but disagrees with trials 2 and 3 beyond them (at 3);
    2 and 3 pass both and agree everywhere. By hand: {2, 3} scores 2 tests x 2 = 4, {1} scores
    2 x 1 = 2, so trial 2 is submitted, where the first visible pass would be trial 1 (drawing
    goes on past a candidate that passes every visible check: `stop_at_pass` off)."""
    replies = [
        inputs(1, 2, 3),  # written from the prompt alone, before any candidate
        code("return 2 * x if x < 3 else -1"),
        code("return x + x"),
        code("return x * 2"),
    ]
    episode, _ = run(replies, task("assert f(1) == 2", "assert f(2) == 4"), stop_at_pass=False)
    selection = episode.selection
    assert selection is not None and selection.rule == "dual agreement"
    assert selection.clusters == [[2, 3], [1]] and selection.scores == [4.0, 2.0]
    assert selection.picks == [1, 1, 2]  # among the first 1, 2, 3 candidates
    assert episode.submitted == 1 and episode.passed  # trial 2's hidden verdict
    assert not episode.verdicts[0].passed  # the first visible pass fails the hidden test


def test_the_tasks_own_checks_outrank_the_models_self_tests() -> None:
    """The task's example says f(1) == 2; the model's two self-tests are wrong (they expect
    2x + 1). Trial 1 passes the task's example only; trials 2 and 3 pass both self-tests and
    fail the example. Dual agreement alone would pick {2, 3} (2 tests x 2 = 4 against 1 x 1);
    the task's own checks come first, so trial 1 is submitted."""
    the_task = with_self_tests(task("assert f(1) == 2"), ["assert f(2) == 5", "assert f(3) == 7"])
    replies = [
        inputs(1, 2),
        code("return x * 2"),
        code("return 2 * x + 1"),
        code("return x + x + 1"),
    ]
    episode, _ = run(replies, the_task)
    selection = episode.selection
    assert selection is not None and selection.clusters == [[1], [2, 3]]
    assert selection.given == [1, 0] and selection.scores == [1.0, 4.0]
    assert selection.picks == [1, 1, 1]
    assert episode.submitted == 0 and episode.passed


def test_with_no_test_output_agreement_decides() -> None:
    replies = [inputs(0, 5), code("return x + 1"), code("return 2 * x"), code("return x + x")]
    episode, _ = run(replies, task())
    assert episode.selection is not None and episode.selection.rule == "output agreement"
    assert episode.selection.clusters == [[2, 3], [1]]
    assert episode.attempts[episode.submitted].trial == 2 and episode.passed


def test_probe_inputs_are_written_only_for_a_task_with_no_visible_check_by_default() -> None:
    """With `probes` auto, a task with no visible check gets its probe inputs (output
    agreement decides, as above); a task with one gets none: no call is made for them, and
    candidates cluster by the checks they pass."""
    replies = [inputs(0, 5), code("return x + 1"), code("return 2 * x"), code("return x + x")]
    episode, _ = run(replies, task(), probes="auto")
    assert episode.selection is not None and episode.selection.rule == "output agreement"
    assert episode.selection.probes == 2 and episode.attempts[episode.submitted].trial == 2
    checked = [code("return x + 1"), code("return 2 * x"), code("return x + x")]
    episode, model = run(checked, task("assert f(0) == 0"), probes="auto", stop_at_pass=False)
    assert len(model.calls) == 3  # the three candidates, no probe call
    selection = episode.selection
    assert selection is not None and selection.probes == 0
    assert selection.rule == "dual agreement" and selection.clusters == [[2, 3], [1]]
    assert episode.attempts[episode.submitted].trial == 2 and episode.passed


def test_with_probes_never_a_task_with_no_check_submits_its_first_candidate() -> None:
    episode, model = run([code("return x + 1")], task(), probes="never")
    assert len(model.calls) == 1  # nothing can tell candidates apart: one is drawn
    assert episode.selection is not None and episode.selection.rule == "first"


def test_a_candidate_that_crashes_on_every_input_is_never_picked() -> None:
    """Trials 1 and 2 raise on every probe (they agree with each other: a cluster of two);
    trial 3, alone, returns values: it is submitted."""
    replies = [
        inputs(1, 2),
        code("raise ValueError('no')"),
        code("raise ValueError('never')"),
        code("return x * 2"),
    ]
    episode, _ = run(replies, task())
    assert episode.selection is not None and episode.selection.crashed == [1, 2]
    assert episode.attempts[episode.submitted].trial == 3 and episode.passed


def test_when_every_candidate_crashes_the_first_is_submitted() -> None:
    replies = [inputs(1), code("raise ValueError"), "no code at all", code("return 1 / 0")]
    episode, _ = run(replies, task())
    assert episode.selection is not None and episode.selection.rule == "first"
    assert episode.submitted == 0 and not episode.passed


def test_a_task_that_is_not_code_goes_by_the_majority_of_normalised_answers() -> None:
    question = Task(
        id="q", family="qa", prompt="Capital of France?",
        checks=[ExactMatchCheck(answer="Paris", visibility="hidden")],
    )  # fmt: skip
    episode, model = run(["London", "Paris.", "the paris"], question)
    assert len(model.calls) == 3  # no input to write: the answers are compared as they are
    assert episode.selection is not None and episode.selection.rule == "majority"
    assert episode.attempts[episode.submitted].trial == 2 and episode.passed
    episode, _ = run(["London", "Paris", "Rome"], question)
    assert episode.submitted == 0 and not episode.passed  # no majority: the first


def test_tied_finalists_are_separated_by_the_input_the_model_writes() -> None:
    """Two candidates that disagree (a tie of one each): without separation the first is
    submitted; with it, the one that returns the value the model says the task implies."""
    replies = [inputs(5), code("return x + 1"), code("return x * 2")]
    episode, _ = run(replies, task(), trials=2)
    assert episode.submitted == 0 and not episode.passed
    separating = json.dumps({"input": [3], "output": 6})
    episode, model = run([*replies, separating], task(), trials=2, separate=True)
    assert episode.selection is not None and episode.selection.rule == "separation"
    assert "trial 2" in episode.selection.separation
    assert episode.submitted == 1 and episode.passed
    shown = model.calls[-1].messages[0]["content"]
    assert "return x + 1" in shown and "return x * 2" in shown  # both finalists are shown


def test_no_hidden_result_changes_the_selection() -> None:
    """The same candidates and visible results with the hidden verdicts flipped: the same
    selection (the hidden checks score the submitted answer only)."""
    replies = [code("return x + 1"), code("return 2 * x"), code("return x + x")]
    first, _ = run([inputs(0, 5), *replies], task("assert f(0) == 0"), stop_at_pass=False)
    flipped = [v.model_copy(deep=True) for v in first.verdicts]
    for verdict in flipped:
        for check in verdict.checks:
            if check.visibility == "hidden":
                check.passed = not check.passed
    again = Selector(
        ScriptedModel([inputs(0, 5)]), LoopSection(stop_at_pass=False, probes="always")
    )
    selection, _ = again.select(task("assert f(0) == 0"), first.attempts, flipped)
    assert first.selection is not None
    assert selection.model_dump() == first.selection.model_dump()


def test_the_selectors_calls_are_charged_to_their_own_role() -> None:
    replies = [inputs(0), code("return x + 1"), code("return 2 * x")]
    episode, _ = run(replies, task(), trials=2)
    assert episode.usage_by_role["selector"].total_tokens > 0
    assert set(episode.usage_by_role) == {"actor", "selector"}


def test_a_paired_study_shares_trial_1_and_scores_the_pick_at_every_budget(
    tmp_path: Path,
) -> None:
    """select's candidate 1 is react's trial 1 (paid once); the report scores the candidate
    selection submits among the first k, for each budget k."""
    replies = [
        code("return 2 * x if x < 3 else -1"),  # react's trial 1, select's candidate 1
        inputs(1, 2, 3),
        code("return x + x"),
        code("return x * 2"),
    ]
    model = ScriptedModel(replies)
    memory = Memory(tmp_path / "mem", HashEmbedding())
    study = Study(
        tasks=[task("assert f(1) == 2", "assert f(2) == 4")], strategies=["react", "select"],
        model_for=lambda s: model, memory=memory,
        config=RunConfig(loop=LoopSection(trials=3, stop_at_pass=False, probes="always")),
    )  # fmt: skip
    study.memory.log.start_run("r", study.manifest())
    study.run("r")
    model.assert_done()
    stats = {s.strategy: s for s in collect(memory.log, "r").strategies}
    assert stats["react"].solved_by_trial == [0, 0, 0]
    assert stats["select"].solved_by_trial == [0, 0, 1]  # picks 1, 1, 2
    assert stats["select"].any_by_trial == [0, 1, 1]
    logged = memory.log.episode("r:select:double")
    assert logged is not None and logged.passed and logged.submitted == 1


def test_the_candidates_are_drawn_at_once() -> None:
    """With `draw_all`, each actor call waits until all three candidates are in flight:
    drawn one after another, the first would wait alone and its call would fail."""
    barrier = threading.Barrier(3, timeout=20)

    def policy(messages: list[Message], tools: object) -> str:
        if "to compare what they do" in str(messages[-1]["content"]):
            return inputs(1)
        barrier.wait()
        return code("return x * 2")

    model = ScriptedModel(policy=policy)
    settings = LoopSettings(
        strategy="select", trials=3, concurrency=3, draw_all=True, probes="always"
    )
    episode = build_loop(model, settings).run_episode(task())
    assert [a.stop_reason for a in episode.attempts] == ["answered"] * 3
    assert [a.trial for a in episode.attempts] == [1, 2, 3] and episode.passed


def test_a_resumed_episode_draws_only_the_missing_candidates(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    settings = LoopSettings(strategy="select", trials=3, probes="always")
    broken = ScriptedModel(
        [inputs(1, 5), code("return x + 1"), code("return x * 2"), RuntimeError("crash")]
    )
    with contextlib.suppress(RuntimeError):
        build_loop(broken, settings, memory=memory).run_episode(task(), "e1")
    logged = memory.log.episode("e1")
    assert logged is not None and len(logged.attempts) == 2 and not memory.log.is_finished("e1")
    again = ScriptedModel([inputs(1, 5), code("return x * 2")])
    episode = build_loop(again, settings, memory=memory).run_episode(task(), "e1")
    again.assert_done()
    assert [a.trial for a in episode.attempts] == [1, 2, 3]
    assert episode.selection is not None and episode.selection.clusters == [[2, 3], [1]]
    assert memory.log.is_finished("e1") and episode.passed


def test_drawing_stops_once_no_further_candidate_could_change_the_pick() -> None:
    """Two tests. Candidates 1 and 2 pass both and agree on every probe: {1, 2} scores 2 x 2
    = 4; a third candidate could score at most 2 x 1 alone, or join them. So it is not
    drawn, and the pick is the one drawing all three makes (the third disagrees: {1, 2}
    still wins). The first wave is the two that could decide it, drawn at once."""
    two = task("assert f(1) == 2", "assert f(2) == 4")
    barrier = threading.Barrier(2, timeout=20)

    def policy(messages: list[Message], tools: object) -> str:
        if "to compare what they do" in str(messages[-1]["content"]):
            return inputs(1, 2, 5)
        barrier.wait()  # the first wave's two candidates are in flight together
        return code("return x * 2")

    model = ScriptedModel(policy=policy)
    settings = LoopSettings(
        strategy="select", trials=3, concurrency=3, stop_at_pass=False, probes="always"
    )
    episode = build_loop(model, settings).run_episode(two)
    assert [a.trial for a in episode.attempts] == [1, 2]
    assert episode.selection is not None and episode.selection.clusters == [[1, 2]]
    assert episode.selection.picks == [1, 1] and episode.passed
    every = [inputs(1, 2, 5), code("return x * 2"), code("return x + x"), code("return 0")]
    full, _ = run_all(every, two)
    assert [a.trial for a in full.attempts] == [1, 2, 3]
    assert full.selection is not None and full.selection.clusters[0] == [1, 2]
    assert full.submitted == episode.submitted == 0


def test_a_candidate_that_passes_every_visible_check_ends_the_drawing() -> None:
    """Candidate 1 passes the task's example and both self-tests: it is submitted without a
    second draw, as honest stopping would. Candidate 1 of the second task fails a self-test,
    so a second is drawn, passes them all and ends it; the pick is made among the two."""
    the_task = with_self_tests(task("assert f(1) == 2"), ["assert f(2) == 4", "assert f(0) == 0"])
    episode, model = run([inputs(1, 5), code("return x * 2")], the_task)
    assert [a.trial for a in episode.attempts] == [1] and len(model.calls) == 2
    assert episode.selection is not None and episode.selection.picks == [1]
    assert episode.passed
    replies = [inputs(1, 5), code("return x * 2 if x else 1"), code("return x + x")]
    episode, _ = run(replies, the_task)
    assert [a.trial for a in episode.attempts] == [1, 2]
    assert episode.submitted == 1 and episode.passed


def test_a_full_visible_pass_is_submitted_over_a_larger_cluster_that_failed_a_check() -> None:
    """Candidates 1 and 3 agree, pass the task's example and fail the self-test; 2 fails it
    another way, so nothing is decided and a fourth is drawn: it passes everything. Stopping
    at a pass submits it, as honest stopping would; drawing on instead (CodeT's rule) lets
    the two that agree outvote it (a tie on score, the larger cluster first)."""
    the_task = with_self_tests(task("assert f(1) == 2", hidden="assert f(0) == 0"),
                               ["assert f(0) == 0"])  # fmt: skip
    one, seven = code("return x * 2 if x else 1"), code("return x * 2 if x else 7")
    replies = [inputs(1, 5, 0), one, seven, one, code("return x + x")]
    episode, _ = run(replies, the_task, trials=4)
    assert [a.trial for a in episode.attempts] == [1, 2, 3, 4]
    assert episode.selection is not None and episode.selection.rule == "full visible pass"
    assert episode.selection.clusters == [[4], [1, 3], [2]]
    assert episode.selection.picks[-1] == 4 and episode.passed
    outvoted, _ = run(replies, the_task, trials=4, stop_at_pass=False)
    assert outvoted.selection is not None and outvoted.selection.rule == "dual agreement"
    assert outvoted.selection.picks[-1] == 1 and not outvoted.passed


def test_a_close_race_draws_every_candidate() -> None:
    """Candidates 1 and 2 disagree beyond the tests: either cluster could still win, so the
    third is drawn and breaks the tie."""
    replies = [inputs(1, 5), code("return x * 2"), code("return 2 * x if x < 3 else 0")]
    the_task = task("assert f(1) == 2")
    episode, _ = run([*replies, code("return x + x")], the_task, stop_at_pass=False)
    assert [a.trial for a in episode.attempts] == [1, 2, 3]
    assert episode.selection is not None and episode.selection.clusters == [[1, 3], [2]]


def run_all(replies: list[str], the_task: Task) -> tuple[Episode, ScriptedModel]:
    model = ScriptedModel(replies)
    settings = LoopSettings(
        strategy="select", trials=len(replies) - 1, draw_all=True, probes="always"
    )
    episode = build_loop(model, settings).run_episode(the_task)
    model.assert_done()
    return episode, model
