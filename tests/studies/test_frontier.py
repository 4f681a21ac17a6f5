"""Success against cost: the strategies no other beats on both (the Pareto set), on a
hand-made set, in the report (tokens, seconds, dollars where priced), its plot and the
viewer's run page."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from mulligan.memory import HashEmbedding, Memory
from mulligan.report.frontier import Point, dominators, frontier
from mulligan.report.report import write_report
from mulligan.schema import Attempt, CheckResult, Usage, Verdict
from tests.helpers.logged_runs import log_episodes

SVG = "{http://www.w3.org/2000/svg}"


def test_the_frontier_of_a_hand_made_set_names_the_strategies_no_other_beats() -> None:
    points = [
        Point("cheap", 0.5, 100),
        Point("twin", 0.5, 100),  # the same as cheap: neither beats the other
        Point("middle", 0.6, 200),
        Point("costly", 0.55, 300),  # middle solves more for less
        Point("weak", 0.4, 150),  # cheap and twin solve more for less
        Point("as-cheap-worse", 0.45, 100),  # as cheap as cheap, and solves less
        Point("as-good-dearer", 0.6, 250),  # as good as middle, and costs more
        Point("best", 0.7, 1000),  # solves most: nothing beats it, however dear
    ]
    assert frontier(points) == ["cheap", "twin", "middle", "best"]
    assert dominators(points) == {  # every one that beats it, dominated or not
        "costly": ["middle", "as-good-dearer"],
        "weak": ["cheap", "twin", "as-cheap-worse"],
        "as-cheap-worse": ["cheap", "twin"],
        "as-good-dearer": ["middle"],
    }
    assert frontier([]) == [] and frontier([Point("alone", 0.0, 0.0)]) == ["alone"]


def passed(ok: bool) -> Verdict:
    checks = [
        CheckResult(type="t", name="v", passed=ok, score=float(ok)),
        CheckResult(type="t", name="h", visibility="hidden", passed=ok, score=float(ok)),
    ]
    return Verdict(passed=ok, score=float(ok), checks=checks)


def attempt_costing(tokens: int, seconds: float, dollars: float | None):  # type: ignore[no-untyped-def]
    def made(trial: int, last: bool) -> Attempt:
        attempt = Attempt(task_id="", trial=trial, seconds=seconds)
        attempt.charge("actor", Usage(prompt_tokens=tokens, cost=dollars))
        return attempt

    return made


def logged(tmp_path: Path, priced: bool) -> tuple[Memory, str]:
    """react solves a; retry and reflexion both solve a and b (b at trial 2), reflexion at
    three times the tokens and dollars but in half the seconds."""
    memory = Memory(tmp_path / "mem", HashEmbedding())
    config = {"strategies": ["react", "retry", "reflexion"], "task_order": ["a", "b"],
              "seed": 0, "config": {"loop": {"trials": 2, "stop": "honest"}}}  # fmt: skip
    memory.log.start_run("hand", config)
    rescued = {"a": [passed(True)], "b": [passed(False), passed(True)]}
    for strategy, made, (tokens, seconds, dollars) in (
        ("react", {"a": [passed(True)], "b": [passed(False)]}, (100, 1.0, 0.01)),
        ("retry", rescued, (100, 1.0, 0.01)),
        ("reflexion", rescued, (300, 0.5, 0.03)),
    ):
        cost = attempt_costing(tokens, seconds, dollars if priced else None)
        log_episodes(memory.log, "hand", {strategy: made}, cost)
    memory.log.end_run("hand")
    return memory, "hand"


def test_the_report_names_the_frontier_on_tokens_seconds_and_dollars(tmp_path: Path) -> None:
    memory, run = logged(tmp_path, priced=True)
    write_report(memory.log, run, tmp_path / "out")
    text = (tmp_path / "out" / "report.md").read_text()
    section = text.split("## Success against cost")[1].split("\n## ")[0]
    # per task: react 1/2 at 100 tokens, 1 s, $0.01; retry 2/2 at 150, 1.5 s, $0.015;
    # reflexion 2/2 at 450, 0.75 s, $0.045
    assert (
        "- tokens per task: on the frontier react (1/2 at 100), retry (2/2 at 150); "
        "dominated: reflexion (2/2 at 450, by retry)." in section
    )
    assert (
        "- seconds per task: on the frontier reflexion (2/2 at 0.75); dominated: react "
        "(1/2 at 1.00, by reflexion), retry (2/2 at 1.50, by reflexion)." in section
    )
    assert (
        "- dollars per task: on the frontier react (1/2 at 0.0100), retry (2/2 at 0.0150); "
        "dominated: reflexion (2/2 at 0.0450, by retry)." in section
    )
    for cost in ("tokens", "seconds", "dollars"):
        assert f"![success against {cost}](frontier_{cost}.svg)" in section
        assert (tmp_path / "out" / f"frontier_{cost}.svg").exists()
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<h2>Success against cost</h2>" in page and "src='frontier_seconds.svg'" in page


def test_without_a_price_the_frontier_leaves_dollars_out_and_says_so(tmp_path: Path) -> None:
    memory, run = logged(tmp_path, priced=False)
    write_report(memory.log, run, tmp_path / "out")
    section = (tmp_path / "out" / "report.md").read_text().split("## Success against cost")[1]
    section = section.split("\n## ")[0]
    assert "- dollars per task: not priced" in section
    assert "frontier_dollars.svg" not in section
    assert not (tmp_path / "out" / "frontier_dollars.svg").exists()
    assert "$/task" not in section


def test_the_plot_marks_the_frontier_and_each_strategy_exactly(tmp_path: Path) -> None:
    memory, run = logged(tmp_path, priced=True)
    write_report(memory.log, run, tmp_path / "out")
    root = ET.parse(tmp_path / "out" / "frontier_tokens.svg").getroot()
    tips = {c.findtext(f"{SVG}title") for c in root.iter(f"{SVG}circle")}
    assert "react: 1/2 submitted answers passed, 100 tokens per task; on the frontier" in tips
    assert (
        "reflexion: 2/2 submitted answers passed, 450 tokens per task; dominated by retry" in tips
    )
    hollow = [c for c in root.iter(f"{SVG}circle") if c.get("fill") == "white"]
    assert [c.findtext(f"{SVG}title", "").split(":")[0] for c in hollow] == ["reflexion"]
    line = next(p for p in root.iter(f"{SVG}polyline") if p.get("class") == "frontier")
    xs = [float(pair.split(",")[0]) for pair in (line.get("points") or "").split()]
    assert xs == sorted(xs) and len(xs) >= 2  # from the cheapest frontier strategy up


def test_the_viewers_run_page_shows_the_frontier(tmp_path: Path) -> None:
    from mulligan.memory.reading import MemoryReader
    from mulligan.view import pages
    from mulligan.view.links import ServerLinks

    memory, run = logged(tmp_path, priced=False)
    reader = MemoryReader(tmp_path / "mem")
    page = pages.run_page(reader, ServerLinks(), run)
    assert "Success against cost" in page and "<svg" in page
    assert (
        "tokens per task: on the frontier react (1/2 at 100), retry (2/2 at 150); "
        "dominated: reflexion (2/2 at 450, by retry)." in page
    )
    assert "dollars per task: not priced" in page


def test_a_strategy_whose_draws_passed_more_than_it_submitted_shows_its_coverage() -> None:
    from mulligan.report import plots
    from mulligan.report.stats import RunStats, StrategyStats

    picks = StrategyStats("select", 1, tasks=10, solved_by_trial=[5], any_by_trial=[8])
    picks.prompt_tokens = 1000
    stops = StrategyStats("retry", 1, tasks=10, solved_by_trial=[6], any_by_trial=[6])
    stops.prompt_tokens = 800
    stats = RunStats("r", {}, 0.0, 1.0, "finished", [picks, stops], [])
    root = ET.fromstring(plots.frontier_svg(stats, "tokens"))
    squares = [r for r in root.iter(f"{SVG}rect") if r.findtext(f"{SVG}title")]
    assert [r.findtext(f"{SVG}title") for r in squares] == [
        "select: some attempt passed on 8/10 (coverage)"
    ]
    select = next(c for c in root.iter(f"{SVG}circle") if "select" in c.findtext(f"{SVG}title", ""))
    assert float(squares[0].get("y") or 0) + 4 < float(select.get("cy") or 0)  # above it
    assert "dominated by retry" in select.findtext(f"{SVG}title", "")
