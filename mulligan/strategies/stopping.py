"""When an episode ends. `honest` (the default): at the first attempt whose feedback-visible
checks all pass, the evidence an agent has, or when its trials run out; the hidden checks
only score the answer it ends with. `oracle`: the hidden checks decide whether to try again,
as many papers' multi-trial figures do; every report says which rule ran."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mulligan.schema import Verdict


@dataclass(frozen=True)
class StopRule:
    name: str
    description: str
    oracle: bool

    def ends(self, verdict: Verdict) -> bool:
        """The episode ends after this verdict: the answer is submitted."""
        if self.oracle:
            return verdict.passed
        return verdict.visible_passed is not False  # no visible check: nothing says try again


HONEST = StopRule(
    "honest",
    "honest stopping: an episode ended at its first attempt whose feedback-visible checks all "
    "passed (or when its trials ran out); the hidden checks only scored the answer it ended with",
    oracle=False,
)
ORACLE = StopRule(
    "oracle",
    "oracle stopping: the hidden checks decided whether to try again (an oracle figure, as in "
    "papers that retry on the real grader; no user gets it)",
    oracle=True,
)
STOP_RULES: dict[str, StopRule] = {rule.name: rule for rule in (HONEST, ORACLE)}


def stop_rule(name: str) -> StopRule:
    if name not in STOP_RULES:
        from mulligan.errors import UserError

        raise UserError(f"--stop {name!r}: use one of {', '.join(STOP_RULES)}")
    return STOP_RULES[name]
