from mulligan.strategies.base import Strategy

RETRY = Strategy("retry", "up to N attempts, nothing carried over")
