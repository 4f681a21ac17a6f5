"""The viewer in a real browser (Playwright driving the system Chromium), on the demo study
made with the scripted model and a logged run beside it: the grid shows the right cells, a
filter narrows it, an episode page shows both attempts, the answer diff and the lesson, a
hostile answer in the log does not run, and the static bundle works from file:// URLs."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

from mulligan.memory.reading import MemoryReader
from mulligan.view.app import Viewer, make_server, url_of
from mulligan.view.bundle import write_bundle
from tests.view.made import EXPECTED, RUN, make_demo, make_logged_run


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("view") / "demo"
    demo_run = make_demo(out)
    make_logged_run(out / "memory")
    return out / "memory", demo_run


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("no chromium on PATH: apt-get install -y chromium (as .ci/run does)")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def served(memory: tuple[Path, str]) -> Iterator[str]:
    server = make_server(Viewer(MemoryReader(memory[0])))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield url_of(server)
    server.shutdown()
    server.server_close()


def _cells(page: Any) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for cell in page.locator("table.grid td.cell").all():
        task = cell.locator("xpath=..").get_attribute("data-task")
        found.setdefault(task, {})[cell.get_attribute("data-strategy")] = cell.get_attribute(
            "data-outcome"
        )
    return found


def test_the_runs_page_lists_both_runs_and_the_grid_is_right(browser: Any, served: str) -> None:
    page = browser.new_page()
    page.goto(served)
    assert page.locator("table.runs tbody tr").count() == 2
    page.get_by_role("link", name=RUN).click()
    assert page.locator("h1").inner_text() == f"Run {RUN}"
    assert _cells(page) == {t: {s: EXPECTED[s][t] for s in EXPECTED} for t in EXPECTED["react"]}
    page.locator("nav.filters").get_by_role("link", name="regressed").click()
    assert "outcome=regressed" in page.url
    assert _cells(page) == {"t1": {"react": "solved", "reflexion": "regressed"}}
    page.close()


def test_the_demo_grid_counts_what_its_script_implies(
    browser: Any, served: str, memory: tuple[Path, str]
) -> None:
    page = browser.new_page()
    page.goto(served)
    page.get_by_role("link", name=memory[1]).click()
    cells = _cells(page)
    assert len(cells) == 10  # ten demo tasks
    solved = {s: sum(c[s] in ("solved", "rescued") for c in cells.values()) for s in
              ("react", "retry", "reflexion", "reflexion-memory")}  # fmt: skip
    assert solved == {"react": 3, "retry": 6, "reflexion": 10, "reflexion-memory": 10}
    page.locator("nav.filters").get_by_role("link", name="reflexion", exact=True).click()
    assert {s for c in _cells(page).values() for s in c} == {"reflexion"}
    page.close()


def test_an_episode_shows_both_attempts_the_diff_and_the_lesson(
    browser: Any, served: str, memory: tuple[Path, str]
) -> None:
    page = browser.new_page()
    page.goto(served)
    page.get_by_role("link", name=memory[1]).click()
    row = page.locator('tr[data-task="demo/units-1"]')
    row.locator('td[data-strategy="reflexion"] a').click()
    page.locator("section#trial-2").wait_for()  # the episode's page has loaded
    assert page.locator("section.attempt").count() == 2
    second = page.locator("section#trial-2")
    assert second.locator("pre.diff .remove").inner_text().strip() == "-3"
    assert second.locator("pre.diff .add").inner_text().strip() == "+3000"
    assert "multiply the km by 1000" in second.locator("li.lesson").inner_text()
    assert page.locator(".hidden-verdict .badge").first.inner_text() == "hidden from the agent"
    second.locator("li.lesson a").first.click()
    assert page.locator("h1").inner_text().startswith("Lesson ")
    page.close()


def test_a_hostile_answer_does_not_run(browser: Any, served: str) -> None:
    page = browser.new_page()
    page.goto(served + f"episode/{RUN}%3Areflexion%3At1")
    assert page.evaluate("window.__pwned") is None
    assert (
        "<script>window.__pwned=1</script>"
        in page.locator("section#trial-1 pre.answer").inner_text()
    )
    page.close()


def test_the_bundle_opens_from_file_urls(
    browser: Any, memory: tuple[Path, str], tmp_path: Path
) -> None:
    written = write_bundle(MemoryReader(memory[0]), RUN, tmp_path / "bundle")
    page = browser.new_page()
    page.goto(written[0].as_uri())
    page.get_by_role("link", name=RUN).click()
    assert page.url.startswith("file://")
    assert _cells(page)["t2"] == {"react": "never", "reflexion": "rescued"}
    page.locator("nav.filters").get_by_role("link", name="rescued").click()
    assert list(_cells(page)) == ["t2"]
    page.locator('td[data-strategy="reflexion"] a').click()
    page.locator("section#trial-2").wait_for()
    assert page.locator("section.attempt").count() == 2
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("getComputedStyle(document.body).margin") == "0px"  # the stylesheet loaded
    page.close()
