from mulligan.strategies.base import Strategy

ESCALATE = Strategy(
    "escalate",
    "as retry, the actor's model first and, once --escalate-after of its attempts failed, a "
    "stronger model's (--escalate-to), each model's tokens under its own name (Kapoor et al. "
    "2024)",
    escalates=True,
    in_default_study=False,
)
