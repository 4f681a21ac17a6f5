"""`benchmarks/persistent_agent.py --smoke`: the persistent agent's study runs end to end on
the package's fake endpoint, session by session in new processes on one memory, and its
numbers are the memory's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mulligan.memory import HashEmbedding, Memory

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "persistent_agent.py"


def shown_validated_at_trial_1(memory: Path, run_id: str) -> int:
    """How many first attempts of the run were shown a lesson; each must have been shown it only after
    the lesson was validated (a candidate never reaches a first attempt). Which attempt of
    session 1 validates the lesson depends on the assignment's coins, so some runs show it
    to the session's last first attempt and some do not."""
    import sqlite3

    with sqlite3.connect(memory / "episodes.db") as db:
        validated = dict(
            db.execute("select lesson_id, min(at) from lesson_events "
                       "where event = 'status:validated' group by lesson_id").fetchall()
        )  # fmt: skip
        shown = [
            (json.loads(ids), finished)
            for ids, finished in db.execute(
                "select a.lesson_ids, a.finished_at from attempts a join episodes e "
                "on e.id = a.episode_id where a.trial = 1 and e.run_id = ?",
                [run_id],
            )
            if json.loads(ids)
        ]
    for ids, finished in shown:
        assert all(i in validated and validated[i] < finished for i in ids), (ids, validated)
    return len(shown)


def test_the_smoke_study_validates_its_lesson_while_working_and_starts_later_sessions_with_it(
    tmp_path: Path,
) -> None:
    """The lesson written in session 1 is validated by the pairs its later attempts make: in
    session 1 or, when the coins left session 1 one pair short, in session 2 (each session's
    attempts at trial 2 complete at least one pair). From then on it reaches every first
    attempt, in a new process. (--paired: the memory arm's attempts shown nothing are the
    baseline's own draws.)"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    out = tmp_path / "study"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--paired", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads((out / "persistent.json").read_text())
    assert [r["session"] for r in rows] == [1, 2, 3]
    first, second, third = rows
    assert first["lessons"]["written"] == 1 and first["lessons"]["pairs"] >= 1
    assert first["lessons"]["validated"] + second["lessons"]["validated"] == 1
    for row in rows:  # a first attempt is shown the lesson only once it is validated
        shown = shown_validated_at_trial_1(out / "memory", row["run_id"])
        assert row["memory"]["first"] == shown
    # validated by session 3 at the latest: from the first attempt on, in a new process
    assert third["memory"]["first"] == third["memory"]["tasks"] == third["memory"]["solved"]
    assert third["baseline"]["solved"] == 0 and third["only_memory"] == third["memory"]["tasks"]
    assert third["memory"]["tokens"] < third["baseline"]["tokens"]
    for row in rows:  # a shown attempt passes, the baseline's draw at its task and trial fails
        shown = row["shown"]
        assert shown["passed"] == shown["attempts"] == shown["baseline_there"] > 0
        assert shown["baseline_passed"] == 0
    assert third["shown"]["attempts"] >= third["memory"]["tasks"]  # every first attempt too
    assert third["shown"]["pairs_helped"] >= 2 and third["shown"]["pairs_hurt"] == 0
    memory = Memory(out / "memory", HashEmbedding())
    (lesson,) = [x for x in memory.store.all() if x.kind == "failure"]
    assert lesson.validity.status == "validated"
    assert lesson.validity.evidence.pairs == sum(row["lessons"]["pairs"] for row in rows)
    assert lesson.validity.evidence.pairs >= 2 and lesson.validity.evidence.hurt == 0
    assert "| 3 | 4 |" in (out / "persistent.md").read_text()
    assert "by chance" in done.stdout


def test_a_resumed_study_runs_no_session_twice_resumes_the_one_cut_short_and_extends(
    tmp_path: Path,
) -> None:
    """--resume keeps the sessions an earlier call finished, resumes the run a kill left
    unfinished in the memory's log rather than starting the session again, and with more
    --sessions adds new ones from the tasks the recorded stream has not used, leaving the
    earlier sessions' tasks as they were (a fresh seeded sample of the larger size would
    have changed them)."""
    import sqlite3

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    out = tmp_path / "study"
    command = [sys.executable, str(SCRIPT), "--smoke", "--out", str(out)]
    started = subprocess.run(
        [*command, "--sessions", "2"], capture_output=True, timeout=600, env=env
    )
    assert started.returncode == 0, started.stderr
    before = json.loads((out / "persistent.json").read_text())
    stream = json.loads((out / "stream.json").read_text())["sessions"]
    assert len(stream) == 2
    with sqlite3.connect(out / "memory" / "episodes.db") as db:  # session 2 as a kill left it
        (newest,) = db.execute("select id from runs order by started_at desc limit 1").fetchone()
        db.execute("update runs set status = 'running' where id = ?", [newest])
    (out / "session-2-memory.json").unlink()
    (out / "session-2-baseline.json").unlink()
    recorded = [{k: v for k, v in row.items() if k != "shown"} for row in before]
    (out / "persistent.json").write_text(json.dumps(recorded))  # as written before that figure

    done = subprocess.run(
        [*command, "--resume", "--sessions", "3"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    reseeded = subprocess.run(
        [*command, "--resume", "--seed", "2"], capture_output=True, text=True, timeout=600, env=env
    )
    assert reseeded.returncode != 0 and "--seed 1" in reseeded.stderr
    extended = json.loads((out / "stream.json").read_text())["sessions"]
    assert extended[:2] == stream and len(extended) == 3
    assert not set(extended[2]) & {task for ids in stream for task in ids}
    with sqlite3.connect(out / "memory" / "episodes.db") as db:
        runs = db.execute("select id, status from runs order by started_at").fetchall()
        episodes = db.execute("select count(*) from episodes").fetchone()[0]
    assert len(runs) == 3 and runs[1] == (newest, "finished")
    assert episodes == 12  # four tasks a session, none run twice
    after = json.loads((out / "persistent.json").read_text())
    assert [row["run_id"] for row in after[:2]] == [row["run_id"] for row in before]
    # the finished session's figures as they were measured; its shown attempts read again
    # from the log (the pairs' directions so far, measured as the session ended, are not)
    assert {k: v for k, v in after[0].items() if k != "shown"} == recorded[0]
    assert after[0]["shown"] == before[0]["shown"] | {"pairs_helped": None, "pairs_hurt": None}
    assert after[1]["memory"]["passed"] == before[1]["memory"]["passed"]


def test_a_stream_of_one_kind_draws_only_tasks_whose_prompt_names_it(tmp_path: Path) -> None:
    """--kind WORD makes a stream whose tasks recur in kind, as one project's would: only
    tasks whose prompt names WORD; a resume must name the same kind, and a kind no task
    names is refused."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    out = tmp_path / "study"
    command = [sys.executable, str(SCRIPT), "--smoke", "--out", str(out)]
    done = subprocess.run(
        [*command, "--kind", "A path is 1", "--sessions", "2"],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    recorded = json.loads((out / "stream.json").read_text())
    assert recorded["kind"] == "A path is 1"
    assert len(recorded["sessions"]) == 1  # the kind's 4 tasks make one session of 4
    assert set(recorded["sessions"][0]) == {"units-1", "units-10", "units-11", "units-12"}
    other = subprocess.run(
        [*command, "--resume", "--kind", "A path is 2"],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert other.returncode != 0 and "--kind 'A path is 1'" in other.stderr
    none = subprocess.run(
        [*command.copy()[:-1], str(tmp_path / "new"), "--kind", "zebra"],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert none.returncode != 0 and "no task" in none.stderr and "zebra" in none.stderr
    blank = subprocess.run(
        [*command.copy()[:-1], str(tmp_path / "blank"), "--kind", " "],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert blank.returncode != 0 and "--kind: blank" in blank.stderr


def test_lessons_given_to_the_study_are_imported_once_as_candidates_and_tried_by_assignment(
    tmp_path: Path,
) -> None:
    """--lessons FILE puts lessons someone else wrote into the memory arm's memory before its
    first session, each a candidate: tried by the assignment like the reflector's own, and
    imported once however often the study is resumed. retry[read-memory] writes nothing of its
    own, so those lessons are all it is shown. A file the import refuses stops the study
    before any session, naming the file."""
    import runpy
    import sqlite3

    smoke = runpy.run_path(str(SCRIPT.with_name("persistent_smoke.py")))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    given = tmp_path / "lessons.jsonl"
    lesson = {"id": "given-1", "text": smoke["SMOKE_LESSON"], "scope": {"family": "units"}}
    given.write_text(json.dumps(lesson | {"validity": {"status": "validated"}}) + "\n")
    out = tmp_path / "study"
    command = [sys.executable, str(SCRIPT), "--smoke", "--paired", "--strategy",
               "retry[read-memory]", "--out", str(out)]  # fmt: skip
    for sessions in ("1", "2"):  # the second call resumes: one session kept, one more run
        done = subprocess.run(
            [*command, "--resume", "--sessions", sessions, "--lessons", str(given)],
            capture_output=True, text=True, timeout=600, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    with sqlite3.connect(out / "memory" / "episodes.db") as db:
        events = [e for (e,) in db.execute(
            "select event from lesson_events where lesson_id = 'given-1' order by rowid")]  # fmt: skip
        first = db.execute(
            "select count(*) from attempts where trial = 1 and lesson_ids like '%given-1%' "
            "and finished_at < (select min(at) from lesson_events where lesson_id = 'given-1' "
            "and event = 'status:validated')"
        ).fetchone()[0]
        stored = db.execute("select count(*) from lessons").fetchone()[0]
    assert stored == 1  # read-memory wrote none of its own
    assert events.count("imported") == 1 and events[0] == "imported"
    assert "assigned" in events and "shown" in events  # tried as a candidate, not trusted
    assert first == 0  # no first attempt saw it before it was validated
    rows = json.loads((out / "persistent.json").read_text())
    assert len(rows) == 2 and rows[0]["shown"]["attempts"] >= 1
    assert [row["lessons"]["written"] for row in rows] == [0, 0]
    assert (
        "status:validated" in events and rows[1]["memory"]["first"] == 4
    )  # then shown from trial 1

    other = tmp_path / "other.jsonl"  # lessons new to a study that has run sessions
    other.write_text(json.dumps(lesson | {"id": "given-2"}) + "\n")
    late = subprocess.run(
        [*command, "--resume", "--sessions", "3", "--lessons", str(other)],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert late.returncode != 0 and "before its first session" in late.stderr
    assert len(json.loads((out / "persistent.json").read_text())) == 2

    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(lesson) + "\n" + '{"text": "no id"}\n')
    refused = subprocess.run(
        [*command[:-1], str(tmp_path / "other"), "--lessons", str(broken)],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert refused.returncode != 0 and "broken.jsonl" in refused.stderr
    assert not (tmp_path / "other" / "session-1-memory.json").exists()
