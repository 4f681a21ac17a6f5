from mulligan.strategies.base import Strategy

SELECT = Strategy(
    "select",
    "N independent candidates at once, one submitted by execution evidence: dual agreement "
    "over the visible checks and self-tests (CodeT), output agreement on model-written inputs "
    "(MBR-exec), optionally two tied finalists separated by an input (S*, --separate)",
    draws_candidates=True,
    in_default_study=False,
)
