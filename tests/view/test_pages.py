"""The viewer's pages without a browser: the grid's cells follow the report's outcome logic
(solved, rescued, regressed against the baseline, never), filters narrow it, an episode page
shows every attempt, the answer diffs, identical resubmissions, the hidden verdict marked as
hidden and the lessons; text from the log is escaped; reading never writes to the memory and
never creates a missing one; the server follows a run that is still being logged; a bundle
refuses a directory it did not write."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from mulligan.errors import UserError
from mulligan.memory.log import EpisodeLog
from mulligan.memory.reading import MemoryReader
from mulligan.report.cells import build_grid, episode_ids
from mulligan.report.stats import collect
from mulligan.schema import Attempt
from mulligan.view import pages
from mulligan.view.app import Viewer
from mulligan.view.bundle import MARK, write_bundle
from mulligan.view.links import ServerLinks
from tests.helpers.logged_runs import garbage_pages, log_run
from tests.view.made import CONFIG, EXPECTED, HOSTILE, LESSON, RUN, make_logged_run, verdict


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    make_logged_run(tmp_path / "memory")
    return tmp_path / "memory"


def _digest(directory: Path) -> str:
    return hashlib.sha256((directory / "episodes.db").read_bytes()).hexdigest()


def test_grid_cells_follow_the_paired_outcomes(memory: Path) -> None:
    reader = MemoryReader(memory)
    grid = build_grid(collect(reader.log, RUN), episode_ids(reader.log.episodes(RUN)))
    found = {label: {task: cells[label].outcome for task, cells in grid.rows}
             for label in grid.labels}  # fmt: skip
    assert grid.baseline == "react"
    assert found == EXPECTED
    cells = dict(grid.rows)
    assert cells["t2"]["reflexion"].trial == 2 and cells["t2"]["reflexion"].gained
    assert cells["t1"]["reflexion"].episode_id == f"{RUN}:reflexion:t1"
    assert grid.discordances[0].only_baseline == ["t1"]
    assert grid.discordances[0].only_this == ["t2"]


def test_filters_narrow_the_grid(memory: Path) -> None:
    reader = MemoryReader(memory)
    page = pages.run_page(reader, ServerLinks(), RUN, outcome="regressed")
    rows = re.findall(r'<tr data-task="([^"]+)">', page)
    assert rows == ["t1"]
    page = pages.run_page(reader, ServerLinks(), RUN, outcome="never", strategy="react")
    assert re.findall(r'<tr data-task="([^"]+)">', page) == ["t2", "t3"]
    assert 'data-strategy="reflexion"' not in page
    with pytest.raises(UserError, match="outcome"):
        pages.run_page(reader, ServerLinks(), RUN, outcome="bogus")


def test_episode_page_shows_attempts_diff_hidden_verdict_and_lessons(memory: Path) -> None:
    reader = MemoryReader(memory)
    page = pages.episode_page(reader, ServerLinks(), f"{RUN}:reflexion:t2")
    assert page.count('class="attempt"') == 2
    assert '<span class="add">+second answer</span>' in page
    assert "hidden from the agent" in page and "secret detail" in page
    assert LESSON.id in page and "Convert km to metres." in page
    assert "Identical resubmission" not in page
    repeated = pages.episode_page(reader, ServerLinks(), f"{RUN}:reflexion:t3")
    assert "Identical resubmission" in repeated


def test_text_from_the_log_is_escaped(memory: Path) -> None:
    reader = MemoryReader(memory)
    links = ServerLinks()
    for page in (pages.episode_page(reader, links, f"{RUN}:reflexion:t1"),
                 pages.lesson_page(reader, links, LESSON.id)):  # fmt: skip
        assert HOSTILE not in page
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page


def test_lesson_page_shows_its_source_and_what_followed_each_use(memory: Path) -> None:
    page = pages.lesson_page(MemoryReader(memory), ServerLinks(), LESSON.id)
    assert ServerLinks().episode(f"{RUN}:reflexion:t1") in page  # its source
    use = re.search(r"<tr><td>retrieved</td>.*?</tr>", page, re.S)
    assert use and "passed (visible checks passed)" in use.group(0)


def test_reading_never_writes_and_a_missing_memory_is_not_made(
    memory: Path, tmp_path: Path
) -> None:
    before = _digest(memory)
    reader = MemoryReader(memory)
    links = ServerLinks()
    pages.runs_page(reader, links)
    pages.run_page(reader, links, RUN)
    write_bundle(reader, RUN, tmp_path / "bundle")
    with pytest.raises(Exception, match="readonly"):
        reader.log.db.conn.execute("delete from runs")
    assert _digest(memory) == before
    with pytest.raises(UserError, match="no episode log"):
        MemoryReader(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


def test_bundle_links_resolve_and_a_foreign_directory_is_refused(
    memory: Path, tmp_path: Path
) -> None:
    reader = MemoryReader(memory)
    out = tmp_path / "bundle"
    written = write_bundle(reader, RUN, out)
    assert written[0].name == "index.html" and (out / MARK).is_file()
    for path in written:
        if path.suffix == ".html":
            for href in re.findall(r'href="([^"]+)"', path.read_text()):
                assert not href.startswith(("/", "http")), (path.name, href)
                assert (out / href).is_file(), (path.name, href)
    write_bundle(reader, RUN, out)  # its own bundle: written over
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not a bundle"):
        write_bundle(reader, RUN, foreign)
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]


def test_the_server_sees_what_a_running_study_logs_next(memory: Path) -> None:
    viewer = Viewer(MemoryReader(memory))
    path = viewer.links.run(RUN)
    assert 'data-task="t5"' not in viewer.answer(path)[2].decode()
    log = EpisodeLog(memory / "episodes.db")  # the study, still writing
    log_run(log, RUN, CONFIG, {"react": {"t5": [verdict(True)]}})
    assert 'data-task="t5"' in viewer.answer(path)[2].decode()


def test_the_server_sees_a_run_that_opened_and_closed_the_log_between_two_pages(
    tmp_path: Path,
) -> None:
    """No writer had the log open when the server started; a short run then wrote it whole
    (its side file gone again when it closed): the next page shows the new run."""
    memory = tmp_path / "memory"
    make_logged_run(memory).db.conn.close()
    assert not Path(f"{memory / 'episodes.db'}-wal").exists()
    viewer = Viewer(MemoryReader(memory))
    assert viewer.answer("/")[0] == 200
    for n in range(3):  # enough that its pages overwrite what the server read before
        log = EpisodeLog(memory / "episodes.db")
        log_run(log, f"later-{n}", CONFIG, {"react": {f"t{i}": [verdict(True)] for i in range(9)}})
        log.db.conn.close()
    assert not Path(f"{memory / 'episodes.db'}-wal").exists()
    status, _, body = viewer.answer(viewer.links.run("later-2"))
    assert status == 200 and 'data-task="t8"' in body.decode()


def test_a_solve_attempt_shows_the_diff_of_the_project(tmp_path: Path) -> None:
    patch = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-return 1\n+return <b>2</b>\n"
    log = EpisodeLog(tmp_path / "m" / "episodes.db")
    solve = {"command": "solve", "directory": "project", "strategies": ["reflexion"]}
    log_run(log, "solve-run", solve, {"reflexion": {"fix": [verdict(True)]}},
            lambda trial, last: Attempt(task_id="", trial=trial, answer="done", changes=patch))  # fmt: skip
    page = pages.episode_page(
        MemoryReader(tmp_path / "m"), ServerLinks(), "solve-run:reflexion:fix"
    )
    assert "Changes to the project" in page
    assert '<span class="add">+return &lt;b&gt;2&lt;/b&gt;</span>' in page
    assert '<span class="remove">-return 1</span>' in page
    assert "project" in pages.runs_page(MemoryReader(tmp_path / "m"), ServerLinks())


def test_a_log_from_an_older_version_is_refused_not_migrated(memory: Path) -> None:
    import sqlite3

    with sqlite3.connect(memory / "episodes.db") as db:  # as if before the last migration
        db.execute("delete from migrations where name = (select max(name) from migrations)")
    before = _digest(memory)
    with pytest.raises(UserError, match="older mulligan.*brings it up to date"):
        MemoryReader(memory)
    assert _digest(memory) == before


def test_a_log_from_a_newer_version_is_refused_by_a_read_and_a_write(memory: Path) -> None:
    """Its records may hold fields this version does not know: neither shown in part nor
    written to, and the user is told to upgrade."""
    import sqlite3

    with sqlite3.connect(memory / "episodes.db") as db:
        db.execute("insert into migrations values ('999_from_a_newer_mulligan', 0)")
    before = _digest(memory)
    for opened in (MemoryReader, lambda where: EpisodeLog(where / "episodes.db")):
        with pytest.raises(UserError, match="newer mulligan.*999_from_a_newer_mulligan.*upgrade"):
            opened(memory)
    assert _digest(memory) == before


def test_a_damaged_log_is_named_on_the_page_and_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log opens (its header and migrations whole) but the pages of attempts and lesson
    events are garbage: the server answers with a page naming the file, and `mulligan view`
    and the commands that read the memory say so in one line."""
    from mulligan.cli import main

    memory = tmp_path / "memory"
    make_logged_run(memory).db.conn.close()
    garbage_pages(memory / "episodes.db", ["attempts", "lesson_events"])
    viewer = Viewer(MemoryReader(memory))
    status, _, body = viewer.answer(viewer.links.episode(f"{RUN}:reflexion:t2"))
    assert status == 500 and "episodes.db is unreadable" in body.decode()
    for argv in (["view", RUN, "--no-open"], ["view", RUN, "--bundle", str(tmp_path / "b")],
                 ["memory", "show", LESSON.id], ["episodes", "show", f"{RUN}:reflexion:t2"]):  # fmt: skip
        assert main([*argv, "--memory", str(memory)]) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "episodes.db is unreadable" in err, argv


def test_a_select_episode_says_which_candidate_was_submitted_and_why(tmp_path: Path) -> None:
    """Three candidates: 1 disagrees with 2 and 3 beyond the visible example; {2, 3} wins by
    dual agreement. The page names the rule, lists each cluster with what it passed and its
    score, and marks trial 2 as the submitted candidate, trial 1 as not."""
    import json

    from mulligan.memory import HashEmbedding, Memory
    from mulligan.schema import PythonTestsCheck, Task
    from mulligan.settings.run_config import LoopSection, RunConfig
    from mulligan.studies.study import Study
    from mulligan.testing import ScriptedModel

    def code(body: str) -> str:
        return f"```python\ndef f(x):\n    {body}\n```"

    checks = [
        PythonTestsCheck(tests="assert f(1) == 2", entry_point="f", name="example"),
        PythonTestsCheck(tests="assert f(3) == 6", entry_point="f", name="hidden",
                         visibility="hidden"),
    ]  # fmt: skip
    task = Task(id="double", family="code", prompt="Write f(x): twice x.", checks=checks)
    replies = [json.dumps({"inputs": [[1], [5]]}), code("return x * 2 if x < 3 else 0"),
               code("return x + x"), code("return 2 * x")]  # fmt: skip
    model = ScriptedModel(replies)
    memory = Memory(tmp_path / "mem", HashEmbedding())
    config = RunConfig(loop=LoopSection(trials=3, stop_at_pass=False))
    study = Study(tasks=[task], strategies=["select"], model_for=lambda s: model,
                  memory=memory, config=config)  # fmt: skip
    memory.log.start_run("r", study.manifest())
    study.run("r")
    page = pages.episode_page(MemoryReader(tmp_path / "mem"), ServerLinks(), "r:select:double")
    assert "chosen by dual agreement" in page
    clusters = re.findall(r'<tr class="cluster( submitted)?">(.*?)</tr>', page, re.S)
    assert [bool(mark) for mark, _ in clusters] == [True, False]
    assert "trial-2" in clusters[0][1] and "trial-3" in clusters[0][1]
    assert "trial-1" in clusters[1][1]
    heads = re.findall(r"<h2>Trial (\d)(.*?)</h2>", page)
    assert [(n, "submitted" in rest) for n, rest in heads] == [
        ("1", False), ("2", True), ("3", False)
    ]  # fmt: skip


def test_lesson_page_names_the_online_counters_for_what_they_count_and_shows_the_verification(
    memory: Path,
) -> None:
    """ "helped" belongs to verification (the same task with and without the lesson); the
    online counters only say what followed a lesson being shown."""
    log = EpisodeLog(memory / "episodes.db")
    lesson = LESSON.model_copy(deep=True, update={"id": "verified-one"})
    v = lesson.validity
    v.retrieved, v.helped, v.hurt, v.status = 3, 2, 1, "validated"
    v.evidence.pairs, v.evidence.helped, v.evidence.hurt = 2, 1, 0
    v.evidence.tasks = ["t2", "t3"]
    log.log_lesson(lesson, stored=True)
    page = pages.lesson_page(MemoryReader(memory), ServerLinks(), "verified-one")
    assert "shown 3 (then passed 2, then failed 1)" in page
    assert "verified on 2 pairs: helped 1, hurt 0 (on t2, t3)" in page
    assert "helped 2" not in page
    unverified = pages.lesson_page(MemoryReader(memory), ServerLinks(), LESSON.id)
    assert "not verified" in unverified


@pytest.mark.parametrize(("cost", "shown"), [(0.0, "not priced"), (None, "not priced"),
                                             (0.0123, "$0.0123")])  # fmt: skip
def test_an_attempt_shows_dollars_only_where_a_price_made_them(
    tmp_path: Path, cost: float | None, shown: str
) -> None:
    """The local model costs 0 and an endpoint nobody priced an unknown amount: neither is
    shown as dollars. The attempt's draw (warming, select-diverse) is shown beside it."""
    from mulligan.schema import Usage

    def priced(trial: int, last: bool) -> Attempt:
        usage = Usage(prompt_tokens=10, completion_tokens=2, cost=cost)
        return Attempt(task_id="", trial=trial, answer="a", usage=usage, drawn_temperature=0.6,
                       approach="approach_plan")  # fmt: skip

    log_run(EpisodeLog(tmp_path / "m" / "episodes.db"), "r", CONFIG,
            {"warming": {"t": [verdict(True)]}}, priced)  # fmt: skip
    page = pages.episode_page(MemoryReader(tmp_path / "m"), ServerLinks(), "r:warming:t")
    assert f"completion tokens · {shown}" in page
    assert ("$" in page) == (cost is not None and cost > 0)
    assert "drawn at temperature 0.6, prompt approach_plan" in page
