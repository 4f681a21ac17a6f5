"""Choosing one of several independent candidates by execution evidence the agent may see.

Each candidate brings which feedback-visible checks it passed (the task's visible checks and
the model's own self-tests) and what it did on inputs the model wrote (for a task that is not
code: its normalised final answer). Candidates that behave the same, on both, form a cluster.

- The task's own checks first: a cluster that passes more of the task's own
  feedback-visible checks (its examples; the model's self-tests left out) ranks above one
  that passes fewer, whatever the self-tests say. The model's tests are wrong often enough
  (on MBPP a self-test failed 62% of the right candidates) that letting them outvote the
  task's own example submits wrong answers.
- Dual agreement (CodeT, Chen et al. 2022): among clusters that pass as many of the task's
  own checks, with at least one test, a cluster scores (tests its members pass) x (members).
- Output agreement (MBR-exec, Shi et al. 2022): with no test, a cluster scores its size; on
  a task that is not code this is the majority of normalised answers.
- Ties: the larger cluster, then the cluster holding the earliest candidate; a cluster
  submits its earliest candidate. With nothing to tell them apart, the first candidate.
- A candidate that ran on no input at all (it has no code, does not load, crashes or times
  out on every probe and passes no test) is never chosen over one that runs.

- Decided early: candidates are drawn until no further one, however it behaves, could
  change the agreement pick (`to_draw`): the best cluster's score is above what any other
  cluster, or a new one, could reach with every candidate still to come. Without `at_pass`
  the pick is the one drawing all N would make; only the tokens differ. With it, a later
  full pass that was never drawn would have been submitted: drawing does not go on for one.
- Stop at a pass (`at_pass`, the default of the select strategy): drawing also stops once a
  candidate that runs passes every feedback-visible check in play (the task's own and every
  self-test), as honest stopping ends any strategy's episode, and that candidate is
  submitted (of several drawn in one wave, the best-ranked), ahead of a larger cluster that
  failed a check. Replayed on logged
  HumanEval and MBPP runs, stopping submitted as many right answers as drawing on, with a
  sixth to a third fewer candidates; submitting the full pass then gained one task at
  N = 5 on each suite and lost none (docs/selection.md). Without `at_pass`, a full pass can
  be outvoted, as dual agreement scores it (CodeT's rule).

Nothing here sees a hidden check: `evidence` keeps the feedback-visible results only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

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
    given: int = 0
    """How many of the task's own feedback-visible checks it passed (self-tests left out)."""


def evidence(trial: int, verdict: Verdict, behaviour: list[str]) -> Evidence:
    """A candidate's evidence: the feedback-visible checks only, never a hidden one."""
    visible = [c for c in verdict.checks if c.visibility == "feedback"]
    passed = frozenset(c.name for c in visible if c.passed)
    runs = bool(passed) or not behaviour or any(b.startswith("=") for b in behaviour)
    given = sum(1 for c in visible if c.passed and not c.self_test)
    return Evidence(trial, passed, tuple(behaviour), runs, given)


def tests_of(verdicts: list[Verdict], given: bool = False) -> int:
    """How many feedback-visible checks the candidates were judged by (`given`: only the
    task's own, the self-tests left out)."""
    names = {
        c.name
        for v in verdicts
        for c in v.checks
        if c.visibility == "feedback" and not (given and c.self_test)
    }
    return len(names)


@dataclass
class Choice:
    trial: int
    rule: str
    clusters: list[list[int]] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    crashed: list[int] = field(default_factory=list)
    given: list[int] = field(default_factory=list)
    """Each cluster's count of the task's own checks passed, in the clusters' order."""

    @property
    def tied(self) -> bool:
        """The two best clusters pass as many of the task's checks and score the same
        (separation may decide between them); a full visible pass is never tied."""
        return (
            self.rule != FULL_PASS
            and len(self.scores) > 1
            and (self.given[0], self.scores[0]) == (self.given[1], self.scores[1])
        )


FULL_PASS = "full visible pass"


def choose(
    candidates: list[Evidence], tests: int, code: bool = True, *, at_pass: bool = False
) -> Choice:
    """The candidate to submit (see the module's rules); `tests`: visible checks in play;
    `at_pass`: a candidate passing every one of them is submitted (the best-ranked)."""
    if not candidates:
        raise ValueError("no candidate to choose from")
    crashed = [c.trial for c in candidates if not c.runs]
    running = [c for c in candidates if c.runs] or candidates
    scored = []
    for passed, members in _groups(running):
        score = float(len(passed) * len(members) if tests else len(members))
        rank = (members[0].given, score, len(members), -members[0].trial)
        scored.append((rank, [m.trial for m in members]))
    scored.sort(reverse=True)
    rule = "dual agreement" if tests else ("output agreement" if code else "majority")
    told_apart = tests or any(c.behaviour for c in running)
    if not told_apart or not any(c.runs for c in candidates):
        rule = "first"  # no evidence, or none runs: nothing to go by
    full = {c.trial for c in candidates if passes_all(c, tests)} if at_pass else set()
    if full:  # the best-ranked cluster of full passes goes first
        top = next(n for n, (_, members) in enumerate(scored) if members[0] in full)
        scored.insert(0, scored.pop(top))
        rule = FULL_PASS
    clusters = [members for _, members in scored]
    scores, given = [rank[1] for rank, _ in scored], [rank[0] for rank, _ in scored]
    return Choice(clusters[0][0], rule, clusters, scores, crashed, given)


def picks(
    candidates: list[Evidence], tests: int, code: bool = True, *, at_pass: bool = False
) -> list[int]:
    """For budgets of 1..N candidates, the trial submitted among the first k."""
    return [
        choose(candidates[:k], tests, code, at_pass=at_pass).trial
        for k in range(1, len(candidates) + 1)
    ]


def _groups(candidates: list[Evidence]) -> list[tuple[frozenset[str], list[Evidence]]]:
    """Candidates that behave the same (visible checks passed, outputs), in order of arrival."""
    groups: dict[tuple[frozenset[str], tuple[str, ...]], list[Evidence]] = {}
    for candidate in candidates:
        groups.setdefault((candidate.passed, candidate.behaviour), []).append(candidate)
    return [(passed, members) for (passed, _), members in groups.items()]


def passes_all(candidate: Evidence, tests: int) -> bool:
    """It runs and passes every one of the `tests` feedback-visible checks (at least one)."""
    return bool(tests) and candidate.runs and len(candidate.passed) == tests


def decided(
    candidates: list[Evidence], tests: int, remaining: int, given: int, *, at_pass: bool
) -> bool:
    """No `remaining` further candidates, however they behave, can change the pick among
    these: the best running cluster ranks strictly above any other cluster could with all of
    them joining it, and above a new cluster of all of them passing everything (a tie is
    never called early). `given`: the task's own checks among the `tests`. With no test and
    no output to compare, the first candidate is submitted whatever follows. `at_pass`: a
    candidate passing every test ends the drawing too."""
    if remaining <= 0:
        return True
    if not candidates:
        return False
    if not tests and not any(c.behaviour for c in candidates):
        return True  # nothing can ever tell them apart: the first is submitted
    if at_pass and any(passes_all(c, tests) for c in candidates):
        return True
    running = [c for c in candidates if c.runs]
    if not running:
        return False  # a later candidate that runs would be chosen over all of these

    def rank(members: list[Evidence], passed: frozenset[str], size: int) -> tuple[int, int]:
        return members[0].given, (len(passed) if tests else 1) * size

    groups = _groups(running)
    ranks = [rank(members, passed, len(members)) for passed, members in groups]
    best = max(range(len(groups)), key=lambda i: (ranks[i], len(groups[i][1])))
    reach = [rank(m, p, len(m) + remaining) for i, (p, m) in enumerate(groups) if i != best]
    reach.append((given, (tests or 1) * remaining))
    return ranks[best] > max(reach)


def to_draw(
    candidates: list[Evidence], verdicts: list[Verdict], remaining: int, *, at_pass: bool
) -> int:
    """How many more candidates to draw at once: 0 when the pick is decided, else the fewest
    that could decide it if they all behaved like the best so far (with none yet, like one
    that passes every test: one alone decides `at_pass`), so that a wave is never smaller
    than it has to be. `verdicts`: the candidates' own, for the visible checks in play."""
    tests, given = tests_of(verdicts), tests_of(verdicts, given=True)
    if decided(candidates, tests, remaining, given, at_pass=at_pass):
        return 0
    if not candidates:
        return 1 if at_pass else remaining // 2 + 1
    if not any(c.runs for c in candidates):
        return remaining
    best = choose(candidates, tests).clusters[0][0]
    like = next(c for c in candidates if c.trial == best)
    last = max(c.trial for c in candidates)
    for wave in range(1, remaining):
        more = [replace(like, trial=last + k) for k in range(1, wave + 1)]  # `like` runs
        if decided(candidates + more, tests, remaining - wave, given, at_pass=at_pass):
            return wave
    return remaining
