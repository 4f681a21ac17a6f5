"""A selection strategy's submission: the candidates' evidence gathered (probe inputs run on
each, the feedback-visible checks' results), one chosen by agreement (agreement.py) and, when
set, two tied finalists separated (separate.py). The model that writes the inputs may be a
stronger one than the actor's (`--reflector-model`)."""

from __future__ import annotations

from dataclasses import dataclass

from mulligan import sandbox
from mulligan.evaluator.agreement import choose, evidence, picks, tests_of
from mulligan.evaluator.normalize import normalize_answer
from mulligan.evaluator.probe import CRASH, outputs, write_inputs
from mulligan.evaluator.separate import separate
from mulligan.llm.base import ChatModel
from mulligan.schema import Attempt, Selection, Task, Usage, Verdict


@dataclass
class Selector:
    model: ChatModel
    """Writes the probe inputs and the finalists' separating input."""
    separate: bool = False
    """When the two best clusters tie, separate their first candidates (S*)."""

    def select(
        self,
        task: Task,
        attempts: list[Attempt],
        verdicts: list[Verdict],
        policy: sandbox.Policy | None = None,
    ) -> tuple[Selection, Usage]:
        """Which candidate to submit, and the usage of the calls that decided it. Only the
        prompt, the candidates' answers and feedback-visible results are looked at."""
        target = task.code_target()
        usage, inputs = Usage(), list[list[object]]()
        if target is not None:
            inputs, usage = write_inputs(self.model, task, target)
            behaviours = [outputs(a.answer or "", target, inputs, policy) for a in attempts]
        else:
            behaviours = [[answer_of(a)] for a in attempts]
        found = [
            evidence(a.trial, v, b) for a, v, b in zip(attempts, verdicts, behaviours, strict=True)
        ]
        tests = tests_of(verdicts)
        choice = choose(found, tests, code=target is not None)
        chosen, rule, separation = picks(found, tests, target is not None), choice.rule, ""
        if self.separate and target is not None and choice.tied:
            answers = {a.trial: a.answer or "" for a in attempts}
            first, second = choice.clusters[0][0], choice.clusters[1][0]
            finalists = ((first, answers[first]), (second, answers[second]))
            winner, separation, spent = separate(self.model, task, target, finalists, policy)
            usage = usage + spent
            if winner is not None:
                chosen[-1], rule = winner, "separation"
        selection = Selection(
            picks=chosen, rule=rule, clusters=choice.clusters, scores=choice.scores,
            crashed=choice.crashed, probes=len(inputs), separation=separation,
        )  # fmt: skip
        return selection, usage


def answer_of(attempt: Attempt) -> str:
    """A final answer that is not code, as agreement compares it (normalised)."""
    text = (attempt.answer or "").strip()
    return "=" + normalize_answer(text) if text else CRASH
