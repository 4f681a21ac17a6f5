"""The evaluator: every check of a task against an attempt, and a verdict."""

from __future__ import annotations

from pathlib import Path

from mulligan.evaluator.checks import RUNNERS, CheckContext, result
from mulligan.llm.base import ChatModel, Metered
from mulligan.sandbox import Policy
from mulligan.schema import Attempt, CheckResult, Task, Verdict


class Evaluator:
    def __init__(self, judge: ChatModel | None = None) -> None:
        self.judge = judge

    def evaluate(
        self,
        task: Task,
        attempt: Attempt,
        workspace: Path | None = None,
        policy: Policy | None = None,
    ) -> Verdict:
        """Only checks decide: an attempt that ran out of budget passes if its checks pass.

        The judge's calls (llm_judge checks) are charged to the attempt's usage; `policy`:
        what the box hides from the code the checks run."""
        judge = Metered(self.judge) if self.judge else None
        ctx = CheckContext(task, attempt, workspace, judge, policy)
        ran: dict[int, CheckResult] = {}
        # feedback-visible checks first: what a hidden check leaves in the workspace must
        # not change what a visible one sees; results stay in the task's order
        for at in sorted(
            range(len(task.checks)), key=lambda i: task.checks[i].visibility != "feedback"
        ):
            check = task.checks[at]
            try:
                ran[at] = RUNNERS[check.type](check, ctx)
            except Exception as exc:  # a check that cannot run fails; the run goes on
                ran[at] = result(check, False, f"cannot run: {type(exc).__name__}: {exc}")
        results = [ran[at] for at in sorted(ran)]
        if judge and judge.calls:
            attempt.charge("judge", judge.usage)
        if not results:
            return Verdict(passed=False, score=0.0, feedback="This task has no checks.")
        return Verdict.of(results, feedback_text(results))


def feedback_text(results: list[CheckResult]) -> str:
    """Only feedback-visible checks; hidden ones are neither shown nor mentioned."""
    return "\n".join(
        f"{'PASS' if r.passed else 'FAIL'} {r.name}: {r.detail}"
        for r in results
        if r.visibility == "feedback"
    )
