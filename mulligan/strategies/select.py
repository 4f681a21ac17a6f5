from dataclasses import replace

from mulligan.strategies.base import Strategy
from mulligan.strategies.memory_option import READS

SELECT = Strategy(
    "select",
    "up to N independent candidates, in waves at once until one passes every visible check "
    "(submitted), else one submitted by execution evidence: the task's own checks first, then "
    "dual agreement over the visible checks and self-tests (CodeT), output agreement on "
    "model-written inputs for a task with no check (MBR-exec), optionally two tied finalists "
    "separated by an input (S*, --separate)",
    draws_candidates=True,
    in_default_study=False,
    options=(READS,),
)
SELECT_DIVERSE = replace(
    SELECT,
    name="select-diverse",
    summary="as select, its candidates drawn across the temperature ladder ([loop] "
    "temperatures) and, in turn, straight to the answer or with a plan written first, so "
    "that they fail less alike",
    ladder="spread",
    approaches=(None, "approach_plan"),
)
