"""What a strategy is: the answers the loop, the study, the report and the CLI ask of it.

Kept free of heavy imports: `mulligan --help` lists the strategies without loading pydantic."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from mulligan.errors import UserError

if TYPE_CHECKING:
    from mulligan.defaults import Carry
    from mulligan.schema import Episode, Lesson, Task
    from mulligan.settings.sections import LoopSection

Retrieve = Callable[[set[str]], list["Lesson"]]
"""Lessons from the persistent store for the next attempt, skipping the ids given."""


@dataclass(frozen=True)
class Option:
    """One word a strategy takes in brackets (`memory-frozen[cases,shuffled]`): the fields of
    the strategy it sets. At most one option of a `group` at once."""

    word: str
    group: str
    summary: str
    sets: Mapping[str, Any]
    refuses: tuple[str, ...] = ()
    """Options it cannot go with (a case has no rule to corrupt)."""


@dataclass(frozen=True)
class Draw:
    """How one trial is drawn: at which temperature, and with which prompt variant."""

    temperature: float | None = None
    """None: the model's own (the run's temperature)."""
    approach: str | None = None
    """A prompt file (prompts/NAME.md) pinned after the task, asking for a way of working
    (a plan first); None: the task's prompt alone."""
    escalated: bool = False
    """Made by the stronger model (`[escalation] model`), not the actor's."""

    @property
    def plain(self) -> bool:
        """Drawn as every strategy draws by default: the run's temperature, the task's prompt
        alone, the actor's model (a paired study's shared trial 1 is such a draw)."""
        return self == Draw()


@dataclass(frozen=True)
class Strategy:
    """One way of going from one attempt to the next. Same actor, budgets and evaluator for
    all: only what a strategy carries over, and whether it reflects, differs."""

    name: str
    summary: str
    repeats: bool = True
    """More than one trial (react makes one)."""
    reflects: bool = False
    """After an attempt that failed, the reflector writes a diagnosis."""
    uses_store: bool = False
    """Reads lessons from the persistent store before an attempt: its trial 1 differs, so it
    runs its own."""
    writes_store: bool = False
    """Writes general lessons (and insights) into the persistent store after an attempt, so
    what it learns early helps later tasks: it runs its tasks in order."""
    carries_reflections: bool = False
    """The episode's own diagnoses go to the next attempt."""
    carries_attempt: bool = False
    """The next attempt sees the previous answer and what the visible checks said."""
    draws_candidates: bool = False
    """Its trials are independent candidates drawn at once, all of them, then one is
    submitted by selection (evaluator/selector.py) instead of the stop rule's pick."""
    in_default_study: bool = True
    """`mulligan bench` runs it when --strategies is not given (the paper's four)."""
    outside_loop: bool = False
    """It is not a way of running the loop but a pipeline of its own (`solve`'s repair
    pipeline): only `solve` runs it, and the loop refuses it."""
    items: str = "lessons"
    """What it reads from the store: `lessons`, `cases` (worked examples) or `both`."""
    twin: str | None = None
    """A faithfulness twin shows what it retrieved `empty`, `shuffled` or `corrupted`
    (memory/twins.py); the report sets it against the arm with the same items and none."""
    verifies: bool = False
    """Its later attempts verify candidate lessons while working: from trial 2 on, each one
    is assigned at random to be shown the task's candidate or not (memory/assignment.py), and
    the outcomes are the candidate's evidence. Without it, a strategy that reads the store
    sees validated lessons only (or every one, with `show_candidates`)."""
    reads_from_trial: int = 1
    """The first trial shown what it reads from the store: 2 shows it only after a failed
    attempt, so its trial 1 is the one without memory (shared in a paired study)."""
    ladder: Literal["climb", "spread"] | None = None
    """Its trials draw at the temperatures of the ladder (`[loop] temperatures`): `climb`,
    one rung a trial, the top one repeating past the end (warming); `spread`, round the
    ladder again past the end (diverse candidates). None: the run's temperature."""
    approaches: tuple[str | None, ...] = ()
    """Prompt variants its trials take in turn (`Draw.approach`); none: the task's alone."""
    escalates: bool = False
    """Its trials after `[loop] escalate_after` are the stronger model's (`--escalate-to`)."""
    options: tuple[Option, ...] = field(default=(), compare=False)
    """The words it takes in brackets, each setting some of the fields above."""

    def with_options(self, words: list[str], flag: str = "--strategies") -> Strategy:
        """This strategy with the options named (`memory-frozen[cases,on-retry]`), named in
        the options' own order; an unknown word or two of a group are the user's mistake."""
        known = {option.word: option for option in self.options}
        unknown = [word for word in words if word not in known]
        if unknown:
            takes = ", ".join(known) or "none"
            raise UserError(
                f"{flag}: {self.name} takes no option {unknown[0]!r} (it takes: {takes})"
            )
        chosen = [option for option in self.options if option.word in words]
        groups = [option.group for option in chosen]
        clash = next((g for g in groups if groups.count(g) > 1), None)
        refused = [(o.word, w) for o in chosen for w in o.refuses if w in words]
        named = f"{flag}: {self.name}[{','.join(words)}]"
        if clash:
            raise UserError(f"{named}: one {clash} option at most")
        if refused:
            raise UserError("{}: {} cannot go with {}".format(named, *refused[0]))
        if not chosen:
            return self
        sets = {key: value for option in chosen for key, value in option.sets.items()}
        name = f"{self.name}[{','.join(option.word for option in chosen)}]"
        summary = "; ".join([self.summary, *(option.summary for option in chosen)])
        return replace(self, name=name, summary=summary, **sets)

    @property
    def shares_first_attempt(self) -> bool:
        """It starts without lessons, drawn as every other strategy draws, so a paired study
        can give it the shared trial 1."""
        plain = self.ladder is None and not any(self.approaches[:1])
        return plain and (not self.uses_store or self.reads_from_trial > 1)

    def trials(self, budget: int) -> int:
        return budget if self.repeats else 1

    def draw(self, trial: int, loop: LoopSection) -> Draw:
        """How trial `trial` (from 1) is drawn under the loop's settings."""
        temperature = approach = None
        if self.ladder and loop.temperatures:
            top = len(loop.temperatures) - 1
            rung = min(trial - 1, top) if self.ladder == "climb" else (trial - 1) % (top + 1)
            temperature = loop.temperatures[rung]
        if self.approaches:
            approach = self.approaches[(trial - 1) % len(self.approaches)]
        return Draw(temperature, approach, self.escalates and trial > loop.escalate_after)

    def check_trials(self, loop: LoopSection) -> None:
        """Refuses settings under which it could not do what it is for: an escalating strategy
        with no trial left for the stronger model would run as retry under another name."""
        if self.escalates and loop.escalate_after >= loop.trials:
            raise UserError(
                f"strategy {self.name!r} hands a task to the stronger model after "
                f"--escalate-after {loop.escalate_after} failed attempts, and --trials "
                f"{loop.trials} leaves it none; make --escalate-after less than --trials"
            )

    def wants(self, lessons: int, cases: int) -> tuple[int, int]:
        """How many general lessons and cases it retrieves, of the numbers the settings give."""
        return (lessons if self.items != "cases" else 0, cases if self.items != "lessons" else 0)

    @property
    def shuffles(self) -> bool:
        """Its retrieved items are stood in for by another family's."""
        return self.twin == "shuffled"

    def lessons_for(
        self, reflections: list[Lesson], carried: int, retrieve: Retrieve, trial: int = 1
    ) -> list[Lesson]:
        """The lessons for attempt `trial`: the episode's last `carried` diagnoses, and with
        the store (from `reads_from_trial` on), what it retrieves first."""
        lessons: list[Lesson] = []
        if self.carries_reflections and carried > 0:
            usable = [r for r in reflections if r.validity.status in ("candidate", "validated")]
            lessons = [r for r in usable if r.kind == "diagnosis"][-carried:]
        if self.uses_store and trial >= self.reads_from_trial:
            from mulligan.memory.twins import disguise

            found = retrieve({lesson.id for lesson in lessons})
            lessons = disguise(found, self.twin, set()) + lessons
        return lessons

    def carry_over(
        self, task: Task, episode: Episode, lessons: list[Lesson], mode: Carry
    ) -> tuple[list[str], str]:
        """(texts for the lessons block, the previous-attempt block) for the next attempt."""
        from mulligan.strategies.carry import carry_over

        if not (self.carries_attempt or lessons):
            return [], ""
        return carry_over(task, episode, lessons, mode if self.carries_attempt else "lessons")
