"""The report's answer to a transfer study: did what was learned on the training split help
on the test split? Built from the log alone, as the rest of the report."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pydantic import ValidationError

from mulligan import prompts, strategies
from mulligan.errors import field_problems
from mulligan.memory.curator import Curation, curation_of, estimated_tokens
from mulligan.memory.log import EpisodeLog
from mulligan.memory.validity import Luck, ValiditySection
from mulligan.report.paired import PAIRED_HEADER, paired_cells
from mulligan.report.repeats import Block, Table
from mulligan.report.stats import RunStats, StrategyStats, collect
from mulligan.report.tables import pct, shown_memory_row, shown_only, submitted_passed
from mulligan.runs.lifecycle import upgraded
from mulligan.schema import Lesson, Usage
from mulligan.studies.transfer import curation_tag, learn_run_id
from mulligan.studies.verify import logged_without, luck, luck_line, verify_run_id

USES = ("retrieved", "helped", "hurt")


@dataclass
class LessonTokens:
    """The learned lessons' block in the prompts of one strategy with the memory."""

    strategy: str
    attempts: int = 0
    with_lessons: int = 0
    block_tokens: int = 0
    """Summed over the attempts that had learned lessons."""
    added_tokens: int = 0
    """The block times the model calls of its attempt: what the lessons cost in prompts."""
    prompt_tokens: int = 0


@dataclass
class TransferStats:
    learning: StrategyStats | None
    curation: Curation | None
    keep_learning: bool
    uses: dict[str, dict[str, int]] = field(default_factory=dict)
    """Lesson id -> retrieved, helped, hurt on the test split."""
    lessons: dict[str, Lesson] = field(default_factory=dict)
    tokens: list[LessonTokens] = field(default_factory=list)
    cases: dict[str, int] = field(default_factory=dict)
    """Case id -> times shown on the test split (the real arms')."""
    luck: Luck | None = None
    """What the verification's noise alone does to a lesson that changes nothing."""
    luck_refused: str | None = None
    """Why no chance is given: the logged rules are ones today's rules refuse."""


def _reads_memory(s: StrategyStats) -> bool:
    strategy = strategies.known(s.strategy)
    return strategy is not None and strategy.uses_store


def _twin_of(twin: StrategyStats, stats: RunStats) -> StrategyStats | None:
    """The arm a faithfulness twin is set against: the same arm in every answer but the twin
    (what it reads, from which trial, what it carries, how it draws)."""
    mine = strategies.known(twin.strategy)
    if mine is None or mine.twin is None:
        return None
    for s in stats.strategies:
        real = strategies.known(s.strategy)
        if real is None or real.twin is not None or s.run_pass != twin.run_pass:
            continue
        if _but_the_twin(real) == _but_the_twin(mine):
            return s
    return None


def _but_the_twin(strategy: strategies.Strategy) -> strategies.Strategy:
    return replace(strategy, name="", summary="", twin=None)


def _is_twin(name: str) -> bool:
    strategy = strategies.known(name)
    return strategy is not None and strategy.twin is not None


def transfer_stats(log: EpisodeLog, stats: RunStats) -> TransferStats | None:
    """None unless the run is a transfer study (its manifest says what it learned on)."""
    if "learn_on" not in stats.manifest:
        return None
    learning = learn_run_id(stats.run_id)
    learned = collect(log, learning).strategies if log.run(learning) else []
    found = TransferStats(
        learned[0] if learned else None,
        curation_of(log, curation_tag(stats.run_id)),
        bool(stats.manifest.get("keep_learning")),
    )
    episodes = {  # a twin's uses are of what it disguised: not the lessons' own
        e["id"]: e["strategy"] for e in log.episodes(stats.run_id) if not _is_twin(e["strategy"])
    }
    for event in log.lesson_events():
        if event["episode_id"] in episodes and event["event"] in USES:
            counts = found.uses.setdefault(event["lesson_id"], dict.fromkeys(USES, 0))
            counts[event["event"]] += 1
    ids = [x.id for x in (found.curation.kept if found.curation else [])] + list(found.uses)
    stored = log.stored_ids(ids)  # the memory's lessons, not an episode's own diagnoses
    used = [x for x in log.lessons(list(dict.fromkeys(ids))) if x.id in stored]
    found.lessons = {x.id: x for x in used if x.kind != "case"}
    shown = {i: uses["retrieved"] for i, uses in found.uses.items()}
    found.cases = {x.id: shown.get(x.id, 0) for x in used if x.kind == "case"}
    logged = upgraded(stats.manifest)["config"].get("validity", {})
    try:
        rules = ValiditySection.model_validate(logged)
    except ValidationError as exc:  # a log from another version, or edited by hand
        found.luck_refused = "; ".join(field_problems(exc, "", "validity."))
    else:
        without = logged_without(log, verify_run_id(stats.run_id))
        found.luck = luck(found.lessons.values(), without, rules)
    for s in stats.strategies:
        if _reads_memory(s):
            found.tokens.append(_lesson_tokens(log, stats.run_id, s.strategy, stored))
    return found


def _lesson_tokens(log: EpisodeLog, run_id: str, strategy: str, stored: set[str]) -> LessonTokens:
    counted = LessonTokens(strategy)
    for row in log.episodes(run_id):
        episode = log.episode(row["id"]) if row["strategy"] == strategy else None
        for attempt in episode.attempts if episode else []:
            counted.attempts += 1
            counted.prompt_tokens += attempt.usage_by_role.get("actor", Usage()).prompt_tokens
            given = log.lessons([i for i in attempt.lesson_ids if i in stored])
            texts = [x.text for x in given if x.kind != "case"]  # a case is no lesson
            if texts:
                block = estimated_tokens(prompts.render("lessons", lessons=texts))
                counted.with_lessons += 1
                counted.block_tokens += block
                counted.added_tokens += block * max(1, len(attempt.steps))
    return counted


TRANSFER_NOTE = (
    "The learning phase ran {learner} over the training tasks (run `{learning}`); the curator "
    "made what it stored into a playbook, and each of its lessons was verified on the "
    "training tasks it is retrieved for, with it and without it (run `{learning_verify}`): "
    "only validated lessons reach a test task unless --show-candidates. The test phase ran "
    "the test tasks without the memory and with it, {mode}. Paired task by task as in the "
    "paired comparison below: only A counts test tasks the learned memory hurt, only B tasks "
    "it helped; a trial-1 row counts only the tasks the memory showed something (on the "
    "others the memory arm's trial 1 is the one without it)."
)
TWINS_NOTE = (
    "The real memory against its faithfulness twins (its retrieved items emptied, shuffled "
    "from another family, or each lesson negated): a twin as good as the real memory says "
    "the actor does not use what the memory holds."
)
FROZEN = "frozen (lessons retrieved and their use logged; nothing written, no counter changed)"
LEARNING = "still learning (--keep-learning: the test tasks' own lessons reach later ones)"


def title(stats: RunStats) -> str:
    manifest = stats.manifest
    learned, tested = len(manifest.get("learn_tasks", [])), len(manifest.get("task_order", []))
    return f"Transfer: learned on {learned} tasks, tested on {tested} others"


def learning_rows(transfer: TransferStats) -> Table:
    s = transfer.learning
    if s is None:
        return [], []
    header = ["phase", "n"] + [
        f"submitted answer passed, {t} trial(s)" for t in range(1, len(s.solved_by_trial) + 1)
    ]
    written = len(transfer.curation.before) if transfer.curation else 0
    row = [f"learning phase ({s.label})", str(s.tasks)] + [
        pct(k, s.tasks) for k in s.solved_by_trial
    ]
    return header + ["lessons stored"], [row + [str(written)]]


def with_and_without_rows(stats: RunStats) -> Table:
    """Each arm with the memory against each without, on the submitted answer; then trial 1
    (where retrieved lessons alone make the difference)."""
    memory = [s for s in stats.strategies if _reads_memory(s)]
    plain = [s for s in stats.strategies if not _reads_memory(s)]
    rows = [
        [a.label, b.label, *paired_cells(submitted_passed(a), submitted_passed(b), stats.seed)]
        for a in plain
        for b in memory
    ]  # then the arms shown something: an arm shown nothing has the trial 1 without memory
    rows += [shown_memory_row(plain[0], b, stats.seed) for b in memory if plain and b.shown_first]
    return PAIRED_HEADER, rows


def twin_rows(stats: RunStats) -> Table:
    """The real memory (A) against each faithfulness twin (B): submitted answer, then trial 1
    on the tasks both were shown something. A twin that does as well as the real memory says
    the actor does not use what the memory holds."""
    rows = []
    for twin in stats.strategies:
        real = _twin_of(twin, stats)
        if real is None:
            continue
        cells = paired_cells(submitted_passed(real), submitted_passed(twin), stats.seed)
        rows.append([real.label, twin.label, *cells])
        shown = real.shown_first & twin.shown_first
        if shown:
            a, b = (shown_only(submitted_passed(s, 1), shown) for s in (real, twin))
            labels = (f"{real.label}, trial 1 (shown)", f"{twin.label}, trial 1 (shown)")
            rows.append([*labels, *paired_cells(a, b, stats.seed)])
    return PAIRED_HEADER, rows


def playbook_rows(c: Curation | None) -> Table:
    if c is None:
        return [], []
    return ["", "lessons", "estimated tokens"], [
        ["before the curator", str(len(c.before)), str(c.tokens(c.before))],
        ["playbook", str(len(c.kept)), str(c.tokens(c.kept))],
    ]


def use_rows(transfer: TransferStats) -> Table:
    """Every lesson of the playbook, and any other the test split retrieved."""
    header = ["lesson", "from task", "shown (test)", "then passed (test)", "then failed (test)"]
    header += ["verified pairs", "helped (verified)", "hurt (verified)", "status"]
    header += ["in the playbook"]
    kept = {x.id for x in transfer.curation.kept} if transfer.curation else set()
    rows = []
    for lesson_id, lesson in transfer.lessons.items():
        uses = transfer.uses.get(lesson_id, dict.fromkeys(USES, 0))
        e = lesson.validity.evidence
        rows.append(
            [lesson.text, lesson.source.task_id, *(str(uses[k]) for k in USES)]
            + [str(e.pairs), str(e.helped), str(e.hurt), lesson.validity.status]
            + ["yes" if lesson_id in kept else "no (written in the test phase)"]
        )
    return header, rows


def dropped_rows(c: Curation | None) -> Table:
    by_id = {x.id: x for x in c.before} if c else {}
    dropped = c.dropped.items() if c else []
    rows = [[by_id[i].text, by_id[i].source.task_id, why] for i, why in dropped if i in by_id]
    return ["dropped lesson", "from task", "why"], rows


def token_lines(transfer: TransferStats) -> list[str]:
    shown = sum(transfer.cases.values())
    lines = [f"Cases were shown as worked examples in {shown} attempts on the test split "
             f"({len(transfer.cases)} distinct case(s))."] if transfer.cases else []  # fmt: skip
    for t in transfer.tokens:
        if not t.with_lessons:
            lines.append(f"No attempt of {t.strategy} was given a learned lesson.")
            continue
        share = 100 * t.added_tokens / t.prompt_tokens if t.prompt_tokens else 0.0
        lines.append(
            f"Lessons add {t.block_tokens / t.with_lessons:.0f} tokens to each prompt of "
            f"{t.strategy} that had any ({t.with_lessons} of its {t.attempts} attempts; the "
            f"lessons block, estimated at four characters a token): {t.added_tokens:,} tokens "
            f"over its model calls, {share:.1f}% of its actor's prompt tokens."
        )
    return lines


def blocks(stats: RunStats, transfer: TransferStats | None) -> list[Block]:
    """The section in order: paragraphs and tables (only those with rows)."""
    if transfer is None:
        return []
    said = TRANSFER_NOTE.format(
        learner=strategies.LEARNER,
        learning=learn_run_id(stats.run_id),
        learning_verify=verify_run_id(stats.run_id),
        mode=LEARNING if transfer.keep_learning else FROZEN,
    )
    twins = twin_rows(stats)
    found: list[Block] = [said, learning_rows(transfer), with_and_without_rows(stats)]
    found += [TWINS_NOTE, twins] if twins[1] else []
    found += token_lines(transfer)
    found += ["The playbook the curator made, and each lesson's use on the test split:"]
    found += [playbook_rows(transfer.curation), use_rows(transfer), dropped_rows(transfer.curation)]
    found += [luck_line(transfer.luck)] if transfer.luck else []
    if transfer.luck_refused:
        found += [
            f"The run's logged verification rules are ones this version refuses "
            f"({transfer.luck_refused}), so no chance is given for them."
        ]
    return [block for block in found if isinstance(block, str) or block[1]]
