"""The report's plots as hand-written SVG (standard library only, byte-stable).

Every text a user controls (strategy labels, titles) is XML-escaped; points and bars
carry a <title> with their exact values, shown as a tooltip on hover.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from mulligan.inputs.paths import write_whole
from mulligan.report import frontier
from mulligan.report.stats import RunStats, StrategyStats, wilson

WIDTH, HEIGHT = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 620, 44, 340
PALETTE = (
    "#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3",
    "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd",
)  # fmt: skip


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _text(x: float, y: float, content: str, anchor: str = "middle", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(content)}</text>'


def _line(x1: float, y1: float, x2: float, y2: float, stroke: str) -> str:
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}"/>'


def _tooltip(tip: str) -> str:
    return f"<title>{escape(tip)}</title>"


def _frame(
    title: str,
    y_label: str,
    top: float,
    ticks: list[tuple[float, str]],
    size: tuple[int, int] = (WIDTH, HEIGHT),
) -> list[str]:
    """The SVG's opening, title, y gridlines with tick labels (value, text) and the axes."""
    middle, (width, height) = (TOP + BOTTOM) / 2, size
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        _tooltip(title),
        f'<rect width="{width}" height="{height}" fill="white"/>',
        _text((LEFT + RIGHT) / 2, 24, title, extra=' font-size="14"'),
        _text(20, middle, y_label, extra=f' transform="rotate(-90 20 {middle:.1f})"'),
    ]
    for value, label in ticks:
        y = y_of(value, top)
        parts += [_line(LEFT, y, RIGHT, y, "#e0e0e0"), _text(LEFT - 6, y + 4, label, "end")]
    parts.append(f'<path d="M{LEFT} {TOP} V{BOTTOM} H{RIGHT}" fill="none" stroke="#333"/>')
    return parts


def y_of(value: float, top: float) -> float:
    """Pixel row of `value` on a y axis from 0 (bottom) to `top`."""
    return BOTTOM - (value / top) * (BOTTOM - TOP) if top else BOTTOM


def _write(path: Path, parts: list[str]) -> None:
    write_whole(path, "\n".join([*parts, "</svg>", ""]))


def _shown(stats: RunStats) -> list[StrategyStats]:
    return [s for s in stats.strategies if s.tasks]


def _marked_line(
    index: int,
    label: str,
    points: list[tuple[float, float]],
    tips: list[str],
    bars: list[tuple[float, float]] | None = None,
) -> list[str]:
    """One strategy: its line, then per point an error bar with caps (`bars`: low and high,
    in pixels) and a marker with its tooltip."""
    fill = colour(index)
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    parts = [f'<g class="strategy">{_tooltip(label)}']
    parts.append(f'<polyline points="{path}" fill="none" stroke="{fill}" stroke-width="2"/>')
    for n, ((x, y), tip) in enumerate(zip(points, tips, strict=True)):
        if bars:
            low, high = bars[n]
            parts += [_line(x, low, x, high, fill), _line(x - 4, low, x + 4, low, fill)]
            parts.append(_line(x - 4, high, x + 4, high, fill))
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{fill}">{_tooltip(tip)}</circle>'
        )
    return [*parts, "</g>"]


def _legend(labels: list[str]) -> list[str]:
    """Right of the axes, so that it hides no point."""
    parts: list[str] = []
    for i, label in enumerate(labels):
        row = TOP + 15 + 18 * i
        parts.append(
            f'<rect x="{RIGHT + 18}" y="{row - 6}" width="18" height="3" fill="{colour(i)}"/>'
        )
        parts.append(_text(RIGHT + 42, row, label, "start"))
    return parts


def success_by_trial(stats: RunStats, path: Path, title_suffix: str = "") -> None:
    shown = _shown(stats)
    trials = stats.trials or 1
    step = (RIGHT - LEFT - 60) / max(trials - 1, 1)

    def x_of(trial: float) -> float:
        return LEFT + 30 + (trial - 1) * step if trials > 1 else (LEFT + RIGHT) / 2

    title = f"Success by trial, Wilson 95% intervals{title_suffix}"
    labels, budgets = [s.label for s in shown], range(1, trials + 1)
    parts = _success_frame(title, labels, budgets, x_of, "trial", "tasks solved (cumulative)", str)
    for i, s in enumerate(shown):  # Wilson error bars, nudged apart where rates are equal
        nudge = 5 * (i - (len(shown) - 1) / 2)
        solved = list(enumerate(s.solved_by_trial, 1))
        points = [(x_of(t) + nudge, y_of(k / s.tasks, 1.05)) for t, k in solved]
        intervals = [wilson(k, s.tasks) for _, k in solved]
        bars = [(y_of(lo, 1.05), y_of(hi, 1.05)) for lo, hi in intervals]
        tips = [
            f"{s.label}, trial {t}: {k}/{s.tasks} = {k / s.tasks:.0%} [{lo:.0%}–{hi:.0%}]"
            for (t, k), (lo, hi) in zip(solved, intervals, strict=True)
        ]
        parts += _marked_line(i, s.label, points, tips, bars)
    _write(path, parts + _legend(labels))


def nice_ticks(highest: float, count: int = 5) -> list[float]:
    """0, step, 2·step… up to at least `highest`; the step is 1, 2 or 5 × 10^k."""
    if highest <= 0:
        return [0.0, 1.0]
    magnitude = 10.0 ** math.floor(math.log10(highest / count))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude * count >= highest)
    return [i * step for i in range(math.ceil(highest / step - 1e-9) + 1)]


def _tick_label(value: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{value:,.{decimals}f}"


def tokens_per_success(stats: RunStats, path: Path, title_suffix: str = "") -> None:
    shown = _shown(stats)
    ticks = nice_ticks(1.1 * max((s.tokens_per_success or 0.0 for s in shown), default=0.0))
    top = ticks[-1]
    labelled = [(v, _tick_label(v, ticks[1])) for v in ticks]
    slot = (RIGHT - LEFT) / max(len(shown), 1)
    longest = 7 * max((len(s.label) for s in shown), default=0)
    tilt = longest > 0.95 * slot  # labels that would overlap are slanted, with room below
    size = (WIDTH, BOTTOM + 30 + int(0.6 * longest) if tilt else HEIGHT)
    title = f"Tokens per success{title_suffix}"
    parts = _frame(title, "tokens per solved task", top, labelled, size)
    for i, s in enumerate(shown):
        value, centre = s.tokens_per_success, LEFT + slot * (i + 0.5)
        y = y_of(value or 0.0, top)
        text, tip = "no success", f"{s.label}: no success in {s.tasks} tasks"
        if value is not None:
            tokens = s.tokens
            text = f"{value:,.0f}"
            tip = f"{s.label}: {value:,.1f} tokens per solved task ({tokens:,} / {s.solved})"
        parts.append(
            f'<rect class="bar" x="{centre - 0.3 * slot:.1f}" y="{y:.1f}" width="{0.6 * slot:.1f}" '
            f'height="{BOTTOM - y:.1f}" fill="{colour(i)}">{_tooltip(tip)}</rect>'
        )
        parts.append(_text(centre, y - 5, text))
        slant = f' transform="rotate(-35 {centre:.1f} {BOTTOM + 14})"' if tilt else ""
        below, anchor = (14, "end") if tilt else (17, "middle")
        parts.append(_text(centre, BOTTOM + below, s.label, anchor, slant))
    _write(path, parts)


def _success_frame(
    title: str,
    labels: list[str],
    xs: Sequence[float],
    x_of: Callable[[float], float],
    x_label: str,
    y_label: str = "submitted answer passed",
    x_text: Callable[[float], str] | None = None,
) -> list[str]:
    """The frame of a plot of success (0 to 100%) against a cost (or the trials) on x, ticks
    at `xs` written by `x_text` (default: as `nice_ticks` spaced them), with room for the
    legend's labels on the right."""
    ticks = [(p / 100, f"{p}%") for p in range(0, 101, 20)]
    width = RIGHT + 48 + 7 * max((len(label) for label in labels), default=0)
    parts = _frame(title, y_label, 1.05, ticks, (width, HEIGHT))
    for value in xs:
        text = x_text(value) if x_text else _tick_label(value, xs[1])
        parts += [_line(x_of(value), BOTTOM, x_of(value), BOTTOM + 4, "#333")]
        parts.append(_text(x_of(value), BOTTOM + 17, text))
    return parts + [_text((LEFT + RIGHT) / 2, BOTTOM + 40, x_label)]


def success_by_tokens(stats: RunStats, path: Path, title_suffix: str = "") -> None:
    """Each strategy a line over its trial budgets: mean tokens per task (x) against the
    submitted answer's success rate (y), so strategies compare at matched budget."""
    shown = _shown(stats)
    spent = [t / s.tasks for s in shown for t in s.tokens_by_trial]
    xs = nice_ticks(1.05 * max(spent, default=0.0))
    right = xs[-1]

    def x_of(tokens: float) -> float:
        return LEFT + (tokens / right) * (RIGHT - LEFT) if right else LEFT

    title = f"Submitted answer passed against tokens per task{title_suffix}"
    labels = [s.label for s in shown]
    parts = _success_frame(title, labels, xs, x_of, "mean tokens per task")
    for i, s in enumerate(shown):
        budgets = list(zip(s.tokens_by_trial, s.solved_by_trial, strict=True))
        points = [(x_of(t / s.tasks), y_of(k / s.tasks, 1.05)) for t, k in budgets]
        tips = [
            f"{s.label}, {trial} trial{'s' * (trial > 1)}: {k}/{s.tasks} submitted answers "
            f"passed, {t / s.tasks:,.0f} tokens per task"
            for trial, (t, k) in enumerate(budgets, 1)
        ]
        parts += _marked_line(i, s.label, points, tips)
    _write(path, parts + _legend(labels))


def frontier_svg(stats: RunStats, cost: str, title_suffix: str = "") -> str:
    """Success against cost a task, a strategy a point at its whole budget: the frontier's
    points filled and joined from the cheapest up, a dominated one hollow; a square above a
    point at its coverage (some attempt passed), joined to it by a dashed line."""
    found = frontier.points(stats, cost)
    on = set(frontier.frontier(found))
    beaten = frontier.dominators(found)
    xs = nice_ticks(1.05 * max((p.cost for p in found), default=0.0))

    def x_of(value: float) -> float:
        return LEFT + 20 + (value / xs[-1]) * (RIGHT - LEFT - 40) if xs[-1] else LEFT + 20

    words, form = frontier.COSTS[cost], frontier.FORMS[cost]
    title = f"Submitted answer passed against {words}{title_suffix}"
    parts = _success_frame(title, [p.label for p in found], xs, x_of, f"mean {words}")
    best = sorted((p for p in found if p.label in on), key=lambda p: (p.cost, p.success))
    path = " ".join(f"{x_of(p.cost):.1f},{y_of(p.success, 1.05):.1f}" for p in best)
    parts.append(
        f'<polyline class="frontier" points="{path}" fill="none" stroke="#999" '
        'stroke-dasharray="5 3"/>'
    )
    named: dict[tuple[str, str], list[str]] = {}  # strategies at one spot share a label
    for p in found:
        spot = (f"{x_of(p.cost):.1f}", f"{y_of(p.success, 1.05):.1f}")
        named.setdefault(spot, []).append(p.label)
    for i, p in enumerate(found):
        x, y, fill = x_of(p.cost), y_of(p.success, 1.05), colour(i)
        here = named[(f"{x:.1f}", f"{y:.1f}")]
        where = "on the frontier" if p.label in on else f"dominated by {', '.join(beaten[p.label])}"
        tip = (
            f"{p.label}: {p.solved}/{p.tasks} submitted answers passed, "
            f"{form.format(p.cost)} {words}; {where}"
        )
        parts.append(f'<g class="strategy">{_tooltip(p.label)}')
        if p.covered > p.solved:
            top = y_of(p.covered / p.tasks, 1.05)
            parts.append(
                f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{top:.1f}" stroke="{fill}" '
                'stroke-dasharray="3 3"/>'
            )
            cover = f"{p.label}: some attempt passed on {p.covered}/{p.tasks} (coverage)"
            parts.append(
                f'<rect x="{x - 4:.1f}" y="{top - 4:.1f}" width="8" height="8" fill="white" '
                f'stroke="{fill}" stroke-width="2">{_tooltip(cover)}</rect>'
            )
        inside = fill if p.label in on else "white"
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{inside}" stroke="{fill}" '
            f'stroke-width="2">{_tooltip(tip)}</circle>'
        )
        if here[0] == p.label:
            parts.append(_text(x + 8, y + 14, ", ".join(here), "start", ' font-size="11"'))
        parts.append("</g>")
    return "\n".join([*parts, *_legend([p.label for p in found]), "</svg>", ""])
