"""A selection strategy's submission: the candidates' evidence gathered (probe inputs run on
each, the feedback-visible checks' results), one chosen by agreement (agreement.py) and, when
set, two tied finalists separated (`separate`). The probe inputs are written before the
candidates are drawn, so the loop can stop drawing once the pick is decided. The model that
writes the inputs may be a stronger one than the actor's (`--reflector-model`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from mulligan import prompts, sandbox
from mulligan.evaluator.agreement import Evidence, choose, evidence, picks, tests_of, to_draw
from mulligan.evaluator.code import last_code_block
from mulligan.evaluator.normalize import normalize_answer
from mulligan.evaluator.probe import CRASH, Inputs, ask_json, outputs, returned, write_inputs
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
        """One candidate's evidence: its visible results and what it did on the probes (for
        a task that is not code, its final answer, normalised)."""
        answer = attempt.answer or ""
        if probes.target is None:
            said = "=" + normalize_answer(answer.strip()) if answer.strip() else CRASH
            return evidence(attempt.trial, verdict, [said])
        behaviour = outputs(answer, probes.target, probes.inputs, policy)
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


def separate(
    model: ChatModel,
    task: Task,
    target: CodeTarget,
    finalists: tuple[tuple[int, str], tuple[int, str]],
    policy: sandbox.Policy | None = None,
) -> tuple[int | None, str, Usage]:
    """Two finalists separated (S*, Li et al. 2025): the model writes one input on which the
    two programs differ and the value the task implies for it; both run on it in the box, and
    the one that returns that value wins. Neither or both: nothing is decided here.

    (the winning trial or None, what happened, the call's usage); `finalists`: two
    (trial, answer) pairs, the better-ranked first."""
    (first, first_answer), (second, second_answer) = finalists
    text = prompts.render(
        "separate",
        task=task.prompt,
        entry_point=target.entry_point,
        first=last_code_block(first_answer).strip("\n"),
        second=last_code_block(second_answer).strip("\n"),
    )
    found, usage = ask_json(model, text)
    args, implied = (found or {}).get("input"), (found or {}).get("output")
    if found is None or not isinstance(args, list) or "output" not in found:
        return None, "no input written: the finalists stay as ranked", usage
    shown = json.dumps(args)[:200]
    got = [outputs(answer, target, [args], policy)[0] for answer in (first_answer, second_answer)]
    if got[0] == got[1]:
        return None, f"on {shown} both returned the same: the finalists stay as ranked", usage
    matched = [trial for trial, out in zip((first, second), got, strict=True) if _is(out, implied)]
    if len(matched) != 1:
        return None, f"on {shown} neither returned the implied value: as ranked", usage
    return matched[0], f"on {shown} only trial {matched[0]} returned the implied value", usage


def _is(output: str, implied: object) -> bool:
    try:
        return bool(returned(output) == implied)
    except ValueError:
        return False
