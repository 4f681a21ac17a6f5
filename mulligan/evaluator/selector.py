"""A selection strategy's submission: the candidates' evidence gathered (probe inputs run on
each, the feedback-visible checks' results), one chosen by agreement (agreement.py) and, when
set, two tied finalists separated (separate.py). The probe inputs are written before the
candidates are drawn, so the loop can stop drawing once the pick is decided. The model that
writes the inputs may be a stronger one than the actor's (`--reflector-model`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mulligan import sandbox
from mulligan.evaluator.agreement import (
    Evidence,
    choose,
    evidence,
    picks,
    tests_of,
    to_draw,
)
from mulligan.evaluator.normalize import normalize_answer
from mulligan.evaluator.probe import CRASH, Inputs, outputs, write_inputs
from mulligan.evaluator.separate import separate
from mulligan.llm.base import ChatModel
from mulligan.schema import Attempt, CodeTarget, Selection, Task, Usage, Verdict
from mulligan.settings.sections import LoopSection


@dataclass(frozen=True)
class Probes:
    """The inputs the model wrote from a code task's prompt (none for a task that is not
    code), and what writing them cost."""

    target: CodeTarget | None
    inputs: Inputs
    usage: Usage


@dataclass
class Selector:
    model: ChatModel
    """Writes the probe inputs and the finalists' separating input."""
    settings: LoopSection = field(default_factory=LoopSection)
    """`separate`: when the two best clusters tie, separate their first candidates (S*);
    `stop_at_pass`: a candidate passing every feedback-visible check ends the drawing."""

    def probes(self, task: Task) -> Probes:
        """The inputs every candidate runs on, written once per task from the prompt alone;
        none (`probes` auto) when the task has feedback-visible checks to cluster by: replayed
        on four logged runs, the probes changed no pick for the better there."""
        target = task.code_target()
        if target is None:
            return Probes(None, [], Usage())
        checked = any(c.visibility == "feedback" for c in task.checks)
        if self.settings.probes == "never" or (self.settings.probes == "auto" and checked):
            return Probes(target, [], Usage())
        inputs, usage = write_inputs(self.model, task, target)
        return Probes(target, inputs, usage)

    def evidence(
        self, attempt: Attempt, verdict: Verdict, probes: Probes, policy: sandbox.Policy | None
    ) -> Evidence:
        """One candidate's evidence: its visible results and what it did on the probes."""
        if probes.target is None:
            return evidence(attempt.trial, verdict, [answer_of(attempt)])
        behaviour = outputs(attempt.answer or "", probes.target, probes.inputs, policy)
        return evidence(attempt.trial, verdict, behaviour)

    def to_draw(self, found: list[Evidence], verdicts: list[Verdict], remaining: int) -> int:
        """How many more candidates to draw at once (0: the pick is decided)."""
        return to_draw(found, verdicts, remaining, at_pass=self.settings.stop_at_pass)

    def select(
        self,
        task: Task,
        attempts: list[Attempt],
        verdicts: list[Verdict],
        policy: sandbox.Policy | None = None,
        probes: Probes | None = None,
        found: list[Evidence] | None = None,
    ) -> tuple[Selection, Usage]:
        """Which candidate to submit, and the usage of the calls that decided it (the
        probes' included). Only the prompt, the candidates' answers and feedback-visible
        results are looked at. `probes` and `found`: evidence gathered while drawing."""
        probes = probes or self.probes(task)
        target, usage = probes.target, probes.usage
        if found is None:
            pairs = zip(attempts, verdicts, strict=True)
            found = [self.evidence(a, v, probes, policy) for a, v in pairs]
        tests = tests_of(verdicts)
        at_pass, code = self.settings.stop_at_pass, target is not None
        choice = choose(found, tests, code, at_pass=at_pass)
        chosen, rule, separation = picks(found, tests, code, at_pass=at_pass), choice.rule, ""
        if self.settings.separate and target is not None and choice.tied:
            answers = {a.trial: a.answer or "" for a in attempts}
            first, second = choice.clusters[0][0], choice.clusters[1][0]
            finalists = ((first, answers[first]), (second, answers[second]))
            winner, separation, spent = separate(self.model, task, target, finalists, policy)
            usage = usage + spent
            if winner is not None:
                chosen[-1], rule = winner, "separation"
        selection = Selection(
            picks=chosen, rule=rule, clusters=choice.clusters, scores=choice.scores,
            given=choice.given, crashed=choice.crashed, probes=len(probes.inputs),
            separation=separation,
        )  # fmt: skip
        return selection, usage


def answer_of(attempt: Attempt) -> str:
    """A final answer that is not code, as agreement compares it (normalised)."""
    text = (attempt.answer or "").strip()
    return "=" + normalize_answer(text) if text else CRASH
