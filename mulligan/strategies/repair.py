from mulligan.strategies.base import Strategy

REPAIR = Strategy(
    "repair",
    "up to N attempts; the previous answer and its visible feedback carried over, no "
    "reflection (self-repair as Olausson et al. 2024 measure it): what reflexion's diagnosis "
    "adds is reflexion against repair",
    carries_attempt=True,
    in_default_study=False,
)
