"""Choosing one of several independent candidates by execution evidence the agent may see.

Each candidate brings which feedback-visible checks it passed (the task's visible checks and
the model's own self-tests) and what it did on inputs the model wrote (for a task that is not
code: its normalised final answer). Candidates that behave the same, on both, form a cluster.

- Dual agreement (CodeT, Chen et al. 2022): with at least one test, a cluster scores
  (tests its members pass) x (members).
- Output agreement (MBR-exec, Shi et al. 2022): with no test, a cluster scores its size; on
  a task that is not code this is the majority of normalised answers.
- Ties: the larger cluster, then the cluster holding the earliest candidate; a cluster
  submits its earliest candidate. With nothing to tell them apart, the first candidate.
- A candidate that ran on no input at all (it has no code, does not load, crashes or times
  out on every probe and passes no test) is never chosen over one that runs.

Nothing here sees a hidden check: `evidence` keeps the feedback-visible results only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mulligan.schema import Verdict


@dataclass(frozen=True)
class Evidence:
    trial: int
    passed: frozenset[str]
    """Names of the feedback-visible checks it passed."""
    behaviour: tuple[str, ...]
    """What it did on each probe input, or its normalised answer."""
    runs: bool
    """It returned a value on some input or passed some test (or there was no input)."""


def evidence(trial: int, verdict: Verdict, behaviour: list[str]) -> Evidence:
    """A candidate's evidence: the feedback-visible checks only, never a hidden one."""
    visible = [c for c in verdict.checks if c.visibility == "feedback"]
    passed = frozenset(c.name for c in visible if c.passed)
    runs = bool(passed) or not behaviour or any(b.startswith("=") for b in behaviour)
    return Evidence(trial, passed, tuple(behaviour), runs)


def tests_of(verdicts: list[Verdict]) -> int:
    """How many feedback-visible checks the candidates were judged by."""
    names = {c.name for v in verdicts for c in v.checks if c.visibility == "feedback"}
    return len(names)


@dataclass
class Choice:
    trial: int
    rule: str
    clusters: list[list[int]] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    crashed: list[int] = field(default_factory=list)

    @property
    def tied(self) -> bool:
        """The two best clusters score the same (separation may decide between them)."""
        return len(self.scores) > 1 and self.scores[0] == self.scores[1]


def choose(candidates: list[Evidence], tests: int, code: bool = True) -> Choice:
    """The candidate to submit (see the module's rules); `tests`: visible checks in play."""
    if not candidates:
        raise ValueError("no candidate to choose from")
    crashed = [c.trial for c in candidates if not c.runs]
    running = [c for c in candidates if c.runs] or candidates
    groups: dict[tuple[frozenset[str], tuple[str, ...]], list[Evidence]] = {}
    for candidate in running:
        groups.setdefault((candidate.passed, candidate.behaviour), []).append(candidate)
    scored = []
    for (passed, _), members in groups.items():
        score = float(len(passed) * len(members) if tests else len(members))
        scored.append((score, len(members), -members[0].trial, [m.trial for m in members]))
    scored.sort(reverse=True)
    clusters, scores = [s[3] for s in scored], [s[0] for s in scored]
    rule = "dual agreement" if tests else ("output agreement" if code else "majority")
    told_apart = tests or any(c.behaviour for c in running)
    if not told_apart or not any(c.runs for c in candidates):
        rule = "first"  # no evidence, or none runs: nothing to go by
    return Choice(clusters[0][0], rule, clusters, scores, crashed)


def picks(candidates: list[Evidence], tests: int, code: bool = True) -> list[int]:
    """For budgets of 1..N candidates, the trial submitted among the first k."""
    return [choose(candidates[:k], tests, code).trial for k in range(1, len(candidates) + 1)]
