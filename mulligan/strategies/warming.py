from mulligan.strategies.base import Strategy

WARMING = Strategy(
    "warming",
    "as retry, each attempt one rung higher on the temperature ladder ([loop] temperatures), "
    "so that later attempts fail less alike (Kapoor et al. 2024)",
    ladder="climb",
    in_default_study=False,
)
