"""When an episode ends. `honest` (the default): at the first attempt whose feedback-visible
checks all pass, the evidence an agent has, or when its trials run out; the hidden checks
only score the answer it ends with. `oracle`: the hidden checks decide whether to try again,
as many papers' multi-trial figures do; every report says which rule ran.

The task's own checks first (`own_checks_first`, the default): on a task with feedback-visible
checks of its own (its examples), those decide, and the model's self-tests only on a task
with none. The small models' own tests are wrong often enough (on MBPP a self-test failed most
right answers) that letting one send a right answer back trades it for a later, often wrong
one: replayed on logged runs, retry stopping this way passed 3 to 5 more tasks of 80 with
fewer attempts (docs/selection.md). Off, every feedback-visible check decides, as before."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from mulligan.errors import UserError

if TYPE_CHECKING:
    from mulligan.schema import Verdict


@dataclass(frozen=True)
class StopRule:
    name: str
    description: str
    oracle: bool
    own_checks_first: bool = True

    def ends(self, verdict: Verdict) -> bool:
        """The episode ends after this verdict: the answer is submitted."""
        if self.oracle:
            return verdict.passed
        own = verdict.own_passed if self.own_checks_first else None
        evidence = verdict.visible_passed if own is None else own
        return evidence is not False  # no visible check: nothing says try again


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


def stop_rule(name: str, own_checks_first: bool = True) -> StopRule:
    if name not in STOP_RULES:
        raise UserError(f"--stop {name!r}: use one of {', '.join(STOP_RULES)}")
    return replace(STOP_RULES[name], own_checks_first=own_checks_first)
