"""The report's selection section, against a hand count: for each strategy, of the tasks
where some attempt passed the hidden checks, how many submitted a passing one; how the
selection strategy decided; the selector's tokens in the role table; the feedback model."""

from __future__ import annotations

from pathlib import Path

from mulligan.memory import HashEmbedding, Memory
from mulligan.report.report import write_report
from mulligan.schema import Attempt, CheckResult, Episode, Selection, Usage, Verdict


def verdict(visible: bool, hidden: bool) -> Verdict:
    checks = [
        CheckResult(type="t", name="v", passed=visible, score=float(visible)),
        CheckResult(type="t", name="h", visibility="hidden", passed=hidden, score=float(hidden)),
    ]
    return Verdict(passed=visible and hidden, score=0.0, checks=checks)


RETRY = {  # honest stopping submits the first visible pass, else the last attempt
    "t1": [(True, False), (True, True)],  # submits trial 1: wrong, though trial 2 was right
    "t2": [(False, False), (True, True)],  # submits trial 2: right
    "t3": [(False, False), (False, False), (False, False)],  # none right
}
SELECT = {  # (verdicts, picks for budgets 1..3)
    "t1": ([(True, False), (True, True), (True, True)], [1, 1, 2]),  # right
    "t2": ([(True, True), (True, False), (True, False)], [1, 2, 2]),  # wrong: trial 1 was right
    "t3": ([(True, False), (True, True), (False, False)], [1, 1, 2]),  # right
}


def logged(memory: Memory) -> str:
    log, run_id = memory.log, "hand"
    config = {"strategies": ["retry", "select"], "task_order": list(RETRY),
              "config": {"loop": {"trials": 3, "stop": "honest"},
                         "reflector": {"model": "big-model"}}}  # fmt: skip
    log.start_run(run_id, config)
    made = {"retry": {t: (v, None) for t, v in RETRY.items()}, "select": SELECT}
    for strategy, tasks in made.items():
        for position, (task_id, (pairs, picks)) in enumerate(tasks.items()):
            episode = Episode(
                id=f"{run_id}:{strategy}:{task_id}",
                run_id=run_id,
                task_id=task_id,
                strategy=strategy,
            )
            log.start_episode(episode, position)
            for trial, pair in enumerate(pairs, 1):
                attempt = Attempt(task_id=task_id, trial=trial)
                attempt.charge("actor", Usage(prompt_tokens=90, completion_tokens=10))
                if picks and trial == len(pairs):
                    rule = "dual agreement" if task_id != "t3" else "separation"
                    attempt.selection = Selection(picks=picks, rule=rule, crashed=[3] * (task_id == "t3"),
                                                  separation="on [1] only trial 2 returned it" * (task_id == "t3"))  # fmt: skip
                    attempt.charge("selector", Usage(prompt_tokens=20, completion_tokens=5))
                episode.attempts.append(attempt)
                episode.verdicts.append(verdict(*pair))
                log.log_attempt(episode, attempt, episode.verdicts[-1])
            episode.passed = episode.verdicts[episode.submitted].passed
            log.end_episode(episode)
    log.end_run(run_id)
    return run_id


def test_selection_accuracy_matches_a_hand_count(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    stats = write_report(memory.log, logged(memory), tmp_path / "out")
    by_name = {s.strategy: s for s in stats.strategies}
    assert by_name["select"].solved_by_trial == [1, 0, 2]  # t1 F F T, t2 T F F, t3 F F T
    assert by_name["retry"].solved == 1
    text = (tmp_path / "out" / "report.md").read_text()
    section = text.split("## Selection")[1].split("\n## ")[0]
    rows = {
        line.split(" | ")[0].strip("| "): line
        for line in section.splitlines()
        if line.startswith("| ")
    }
    assert "| 3 | 2 | 1 | 1/2 = 50%" in rows["retry"]  # t1 and t2 had a right attempt
    assert "| 3 | 3 | 2 | 2/3 = 67%" in rows["select"]
    assert "decided by dual agreement 2, separation 1" in section
    assert "1 candidates ran on no input" in section and "separated in 1 tasks" in section
    assert "Feedback model: big-model" in section
    assert "selector tok/task" in text
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<h2>Selection</h2>" in page and "2/3 = 67%" in page


def test_the_section_says_whether_the_draws_or_the_pick_fell_short(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    write_report(memory.log, logged(memory), tmp_path / "out")
    section = (tmp_path / "out" / "report.md").read_text().split("## Selection")[1]
    # every task had a right candidate (t1 trial 2, t2 trial 1, t3 trial 2); t2's pick was wrong
    assert (
        "select: some draw passed the hidden checks on 3 of 3 tasks (coverage), the submitted "
        "answer on 2: the draws fell short on 0, the pick on 1." in section
    )
    assert "retry: some draw" not in section  # no selection: its honest stop is the table's
