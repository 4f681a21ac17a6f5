from mulligan.strategies.base import Strategy

REFLEXION = Strategy(
    "reflexion",
    "up to N attempts; the previous answer, its visible feedback and the episode's last "
    "diagnoses carried over (Shinn et al. 2023)",
    reflects=True,
    carries_reflections=True,
    carries_attempt=True,
)
