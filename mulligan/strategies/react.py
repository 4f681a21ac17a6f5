from mulligan.strategies.base import Strategy

REACT = Strategy("react", "one attempt", repeats=False)
