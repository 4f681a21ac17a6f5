"""The report's PNG plots (matplotlib, headless, byte-stable for the same inputs)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mulligan.bench.stats import RunStats, wilson


def _pyplot() -> Any:
    """matplotlib, headless, loaded when a plot is drawn (not when the CLI starts)."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


PNG_METADATA = {"Software": None}  # no version or date stamp: rebuilds are identical


def success_by_trial(stats: RunStats, path: Path, title_suffix: str = "") -> None:
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for s in stats.strategies:
        if not s.tasks:
            continue
        trials = list(range(1, len(s.solved_by_trial) + 1))
        rates = [k / s.tasks for k in s.solved_by_trial]
        intervals = [wilson(k, s.tasks) for k in s.solved_by_trial]
        below = [r - lo for r, (lo, _) in zip(rates, intervals, strict=True)]
        above = [hi - r for r, (_, hi) in zip(rates, intervals, strict=True)]
        axes.errorbar(trials, rates, yerr=[below, above], marker="o", capsize=3, label=s.label)
    axes.set_xlabel("trial")
    axes.set_ylabel("tasks solved (cumulative)")
    axes.set_ylim(0, 1.05)
    axes.set_xticks(
        range(1, max((len(s.solved_by_trial) for s in stats.strategies), default=1) + 1)
    )
    axes.set_title(f"Success by trial, Wilson 95% intervals{title_suffix}")
    axes.legend(loc="lower right")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, metadata=PNG_METADATA)
    plt.close(figure)


def tokens_per_success(stats: RunStats, path: Path, title_suffix: str = "") -> None:
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    labels = [s.label for s in stats.strategies if s.tasks]
    values = [s.tokens_per_success or 0.0 for s in stats.strategies if s.tasks]
    bars = axes.bar(labels, values, color="#4c72b0")
    for bar, s in zip(bars, [s for s in stats.strategies if s.tasks], strict=True):
        text = f"{s.tokens_per_success:,.0f}" if s.tokens_per_success else "no success"
        axes.annotate(
            text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom"
        )
    axes.set_ylabel("tokens per solved task")
    axes.set_title(f"Tokens per success{title_suffix}")
    figure.tight_layout()
    figure.savefig(path, metadata=PNG_METADATA)
    plt.close(figure)
