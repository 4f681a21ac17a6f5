from mulligan.strategies.base import Strategy

REFLEXION_MEMORY = Strategy(
    "reflexion-memory",
    "as reflexion, plus general lessons retrieved from and written into the persistent store",
    reflects=True,
    uses_store=True,
    writes_store=True,
    carries_reflections=True,
    carries_attempt=True,
    verifies=True,
)
