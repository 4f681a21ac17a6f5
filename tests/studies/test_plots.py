"""The report's plots are hand-written SVG; matplotlib is not needed."""

from __future__ import annotations

import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mulligan.report import plots
from mulligan.report.stats import RunStats, StrategyStats, wilson

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

SVG = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parents[2]
TRICKY = 'a<b&c>"d'


def strategy(
    name: str, solved_by_trial: list[int], tokens: int = 0, tasks: int = 10
) -> StrategyStats:
    return StrategyStats(
        name, 1, tasks=tasks, solved_by_trial=solved_by_trial, prompt_tokens=tokens
    )


def run_stats(*strategies: StrategyStats) -> RunStats:
    return RunStats("r1", {}, 0.0, 1.0, "done", list(strategies), [])


def parse(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    assert root.get("width") and root.get("height") and root.get("viewBox")
    return root


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def series(root: ET.Element) -> dict[str, list[tuple[float, float]]]:
    """Strategy label -> the (x, y) points of its line."""
    lines = {}
    for group in root.iter(f"{SVG}g"):
        label = group.findtext(f"{SVG}title") or ""
        points = group.find(f"{SVG}polyline")
        assert points is not None
        pairs = [p.split(",") for p in (points.get("points") or "").split()]
        lines[label] = [(float(x), float(y)) for x, y in pairs]
    return lines


def test_success_plot_has_one_line_per_strategy_whose_height_follows_the_rate(
    tmp_path: Path,
) -> None:
    stats = run_stats(
        strategy("always", [10, 10, 10]),
        strategy("rarely", [3, 3, 3]),
        strategy("learns", [0, 5, 10]),
        strategy("unrun", [0, 0, 0], tasks=0),  # no finished task: not drawn
    )
    plots.success_by_trial(stats, tmp_path / "s.svg")
    root = parse(tmp_path / "s.svg")
    lines = series(root)
    assert list(lines) == ["always", "rarely", "learns"]
    assert all(len(points) == 3 for points in lines.values())
    for t in range(3):
        assert lines["always"][t][1] < lines["rarely"][t][1]  # higher on screen = smaller y
    learns = [y for _, y in lines["learns"]]
    assert learns[0] > learns[1] > learns[2] == lines["always"][2][1]
    assert [x for x, _ in lines["rarely"]] == sorted(x for x, _ in lines["rarely"])
    strokes = [p.get("stroke") for p in root.iter(f"{SVG}polyline")]
    assert len(set(strokes)) == 3
    assert {"1", "2", "3", "0%", "100%", "trial", "tasks solved (cumulative)"} <= set(texts(root))
    assert "Success by trial, Wilson 95% intervals" in texts(root)


def test_each_point_has_its_exact_value_and_wilson_error_bar(tmp_path: Path) -> None:
    plots.success_by_trial(run_stats(strategy("rarely", [3, 6])), tmp_path / "s.svg")
    root = parse(tmp_path / "s.svg")
    tips = [c.findtext(f"{SVG}title") for c in root.iter(f"{SVG}circle")]
    assert tips == [
        "rarely, trial 1: 3/10 = 30% [11%–60%]",
        "rarely, trial 2: 6/10 = 60% [31%–83%]",
    ]
    group = next(root.iter(f"{SVG}g"))
    bars = [line for line in group.iter(f"{SVG}line") if line.get("x1") == line.get("x2")]
    assert len(bars) == 2
    for bar, k in zip(bars, (3, 6), strict=True):
        low, high = wilson(k, 10)
        assert float(bar.get("y1") or 0) == pytest.approx(plots.y_of(low, 1.05), abs=0.06)
        assert float(bar.get("y2") or 0) == pytest.approx(plots.y_of(high, 1.05), abs=0.06)
    caps = [line for line in group.iter(f"{SVG}line") if line.get("y1") == line.get("y2")]
    assert len(caps) == 4


def test_bar_heights_are_ordered_as_tokens_per_success(tmp_path: Path) -> None:
    stats = run_stats(
        strategy("cheap", [10], tokens=1000),  # 100 per success
        strategy("dear", [3], tokens=3000),  # 1,000 per success
        strategy("hopeless", [0], tokens=500),
    )
    plots.tokens_per_success(stats, tmp_path / "t.svg", " (scripted model)")
    root = parse(tmp_path / "t.svg")
    bars = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "bar"]
    heights = [float(b.get("height") or 0) for b in bars]
    assert heights[1] > heights[0] > heights[2] == 0
    assert heights[1] == pytest.approx(10 * heights[0], rel=0.01)
    assert {"100", "1,000", "no success", "cheap", "dear", "hopeless"} <= set(texts(root))
    assert bars[1].findtext(f"{SVG}title") == ("dear: 1,000.0 tokens per solved task (3,000 / 3)")
    assert "Tokens per success (scripted model)" in texts(root)
    assert len({b.get("fill") for b in bars}) == 3


@pytest.mark.parametrize("highest", [0.03, 0.7, 1, 7, 42, 567.1, 1000, 98_765])
def test_bar_chart_ticks_are_round_and_cover_the_highest_bar(highest: float) -> None:
    ticks = plots.nice_ticks(highest)
    step = ticks[1]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 6) in (1, 2, 5)
    assert ticks[0] == 0 and ticks[-1] >= highest > ticks[-2]
    assert 3 <= len(ticks) <= 7


def test_user_text_is_escaped_and_the_file_still_parses(tmp_path: Path) -> None:
    stats = run_stats(strategy(TRICKY, [2, 4], tokens=400), strategy("plain", [0, 0]))
    plots.success_by_trial(stats, tmp_path / "s.svg", " & <more>")
    plots.tokens_per_success(stats, tmp_path / "t.svg", " & <more>")
    for name in ("s.svg", "t.svg"):
        raw = (tmp_path / name).read_text()
        assert TRICKY not in raw and "a&lt;b&amp;c&gt;" in raw
        root = parse(tmp_path / name)
        assert TRICKY in texts(root)  # the parser gives back the label as written
        assert any(t.endswith(" & <more>") for t in texts(root))
    assert list(series(parse(tmp_path / "s.svg"))) == [TRICKY, "plain"]


def test_same_inputs_same_bytes(tmp_path: Path) -> None:
    stats = run_stats(strategy("a", [1, 2, 3], tokens=999), strategy("b", [0, 0, 0]))
    for draw in (plots.success_by_trial, plots.tokens_per_success):
        draw(stats, tmp_path / "one.svg")
        draw(stats, tmp_path / "two.svg")
        assert (tmp_path / "one.svg").read_bytes() == (tmp_path / "two.svg").read_bytes()


BLOCKED = """
import sys
sys.modules["matplotlib"] = None  # any `import matplotlib` now raises ImportError
from mulligan.cli import main
sys.exit(main(["demo", "--out", sys.argv[1]]))
"""


def test_demo_report_needs_no_matplotlib(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED, str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    for name in ("success_by_trial.svg", "tokens_per_success.svg"):
        parse(out / name)
    assert "success_by_trial.svg" in (out / "report.html").read_text()


def test_matplotlib_is_no_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.lower().startswith("matplotlib")]


def test_long_bar_labels_are_slanted_with_room_below(tmp_path: Path) -> None:
    names = [f"reflexion-memory (pass {p})" for p in range(1, 9)]
    plots.tokens_per_success(run_stats(*(strategy(n, [5], 100) for n in names)), tmp_path / "t.svg")
    root = parse(tmp_path / "t.svg")
    labels = [t for t in root.iter(f"{SVG}text") if t.text in names]
    assert len(labels) == 8 and all("rotate(-35" in (t.get("transform") or "") for t in labels)
    assert int(root.get("height") or 0) > plots.HEIGHT
    plots.tokens_per_success(run_stats(strategy("react", [5], 100)), tmp_path / "short.svg")
    short = parse(tmp_path / "short.svg")
    assert not [
        t for t in short.iter(f"{SVG}text") if t.get("transform", "").startswith("rotate(-35")
    ]
