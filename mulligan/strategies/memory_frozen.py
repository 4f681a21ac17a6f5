"""memory-frozen, the test phase of a transfer study, and its variants: what it reads
(lessons, cases or both), the faithfulness twins (its retrieved items emptied, shuffled
or corrupted: memory/twins.py), and `-on-retry`: the memory shown only after a failed
attempt, so that trial 1 is the one without memory."""

from dataclasses import replace

from mulligan.strategies.base import Strategy

MEMORY_FROZEN = Strategy(
    "memory-frozen",
    "as reflexion, plus general lessons retrieved from the persistent store, which it never "
    "writes: the test phase of a transfer study (bench --learn-on)",
    reflects=True,
    uses_store=True,
    carries_reflections=True,
    carries_attempt=True,
    in_default_study=False,
)
ITEMS = {
    "lessons": "general lessons",
    "cases": "cases (worked examples)",
    "both": "lessons and cases",
}
TWINS = {
    "empty": "emptied (each item in place, its content removed)",
    "shuffled": "shuffled (each item stood in for by another family's)",
    "corrupted": "corrupted (each lesson negated by a fixed rewrite)",
}


def variant(base: Strategy, items: str, twin: str | None) -> Strategy:
    """`base` reading `items`, as the `twin` if one is given: `memory-frozen-cases`,
    `memory-frozen-shuffled`, `memory-frozen-both-corrupted`, ..."""
    name = "-".join(
        [base.name] + ([items] if items != "lessons" else []) + ([twin] if twin else [])
    )
    summary = f"as {base.name}, reading {ITEMS[items]}" + (f", {TWINS[twin]}" if twin else "")
    return replace(base, name=name, summary=summary, items=items, twin=twin)


def on_retry(base: Strategy) -> Strategy:
    """`base` shown its memory only from trial 2 on: `memory-frozen-cases-on-retry`, ..."""
    summary = f"{base.summary}, only after a failed attempt (trial 1 without memory)"
    return replace(base, name=f"{base.name}-on-retry", summary=summary, reads_from_trial=2)


VARIANTS = tuple(
    variant(MEMORY_FROZEN, items, twin)
    for items in ITEMS
    for twin in (None, *TWINS)
    if (items, twin) != ("lessons", None) and not (items == "cases" and twin == "corrupted")
)
"""Every variant but memory-frozen itself; a case has no rule to corrupt."""
ON_RETRY = tuple(on_retry(s) for s in (MEMORY_FROZEN, *VARIANTS) if s.twin is None)
"""memory-frozen-on-retry, -cases-on-retry and -both-on-retry."""
