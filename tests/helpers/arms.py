"""Every arm `--strategies` can name: each strategy with each combination of its options."""

from __future__ import annotations

from itertools import product

from mulligan import strategies
from mulligan.strategies import Strategy


def every_arm() -> list[Strategy]:
    """Every strategy with every combination of its options it takes (at most one of a
    group): what `--strategies` can name."""
    arms = []
    for base in strategies.REGISTRY.values():
        groups: dict[str, list[str]] = {}
        for option in base.options:
            groups.setdefault(option.group, []).append(option.word)
        for words in product(*[[None, *ws] for ws in groups.values()]):
            chosen = [w for w in words if w]
            refused = any(r in chosen for o in base.options if o.word in chosen for r in o.refuses)
            if not refused:
                arms.append(base.with_options(chosen))
    return arms
