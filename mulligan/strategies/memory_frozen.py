"""memory-frozen, the test phase of a transfer study, and its variants: what it reads
(lessons, cases or both) and the faithfulness twins (its retrieved items emptied, shuffled
or corrupted: memory/twins.py)."""

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


VARIANTS = tuple(
    variant(MEMORY_FROZEN, items, twin)
    for items in ITEMS
    for twin in (None, *TWINS)
    if (items, twin) != ("lessons", None) and not (items == "cases" and twin == "corrupted")
)
"""Every variant but memory-frozen itself; a case has no rule to corrupt."""
