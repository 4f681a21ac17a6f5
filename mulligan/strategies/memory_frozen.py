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
