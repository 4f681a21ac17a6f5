"""memory-frozen, the test phase of a transfer study, and its options: what it reads
(`lessons`, `cases` or `both`), a faithfulness twin (its retrieved items `empty`, `shuffled`
or `corrupted`: memory/twins.py), and `on-retry`: the memory shown only after a failed
attempt, so that trial 1 is the one without memory. One arm each in `--strategies`, e.g.
`memory-frozen[cases,shuffled]`; the names of before (`memory-frozen-cases-shuffled`, ...)
still read, resume and report as they were."""

from dataclasses import replace

from mulligan.strategies.base import Option, Strategy

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
OPTIONS = (
    *(
        Option(items, "items", f"reading {words}", {"items": items})
        for items, words in ITEMS.items()
        if items != "lessons"
    ),
    *(
        Option(twin, "twin", words, {"twin": twin}, ("cases",) if twin == "corrupted" else ())
        for twin, words in TWINS.items()
    ),
    Option(
        "on-retry",
        "from",
        "only after a failed attempt (trial 1 without memory)",
        {"reads_from_trial": 2},
    ),
)

MEMORY_FROZEN = Strategy(
    "memory-frozen",
    "as reflexion, plus general lessons retrieved from the persistent store, which it never "
    "writes: the test phase of a transfer study (bench --learn-on)",
    reflects=True,
    uses_store=True,
    carries_reflections=True,
    carries_attempt=True,
    in_default_study=False,
    options=OPTIONS,
)


def legacy_words(name: str) -> list[str] | None:
    """The options an old name stood for (`memory-frozen-cases-on-retry` -> cases, on-retry),
    or None if it is not one."""
    prefix = MEMORY_FROZEN.name + "-"
    if not name.startswith(prefix):
        return None
    rest, words = name.removeprefix(prefix), []
    if rest.endswith("on-retry"):
        rest, words = rest.removesuffix("on-retry").rstrip("-"), ["on-retry"]
    parts = rest.split("-") if rest else []
    return parts + words if all(p in ITEMS or p in TWINS for p in parts) else None


def legacy(name: str) -> Strategy | None:
    """An old name's strategy, keeping the old name: a logged run's episodes keep their ids.
    Only the names there were: each option once, in the options' order."""
    words = legacy_words(name)
    if not words:
        return None
    strategy = MEMORY_FROZEN.with_options(words)
    chosen = [option.word for option in OPTIONS if option.word in words]
    if name != "-".join([MEMORY_FROZEN.name, *chosen]):
        return None
    return replace(strategy, name=name)
