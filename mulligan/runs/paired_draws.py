"""A paired study's memory arm reusing the attempts its baseline made (`run --draws-from`).

An attempt the loop would make from a task's bare prompt (no lesson shown, nothing carried,
its strategy's plain draw) is a draw from the same distribution as the baseline's attempt at
that trial, when the baseline ran the same task with the same model, sampling, budget and
prompts, and its strategy carried nothing from one trial to the next. Reusing that draw
makes the two arms differ only in the attempts a lesson was shown to (common random numbers):
their comparison measures the lessons, not the sampler. A sampling seed cannot do this on a
server that batches requests: the same seed does not give the same draw there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mulligan import strategies
from mulligan.errors import UserError
from mulligan.loop import Drawn
from mulligan.memory.log import EpisodeLog
from mulligan.memory.reading import MemoryReader, OlderLog
from mulligan.runs.runner import episode_id
from mulligan.schema import Task

SAME = (
    ("config", "actor"),
    ("config", "budget"),
    ("config", "compression"),
    ("config", "endpoint", "model"),
    ("config", "endpoint", "temperature"),
    ("config", "loop", "self_tests"),
    ("config", "run", "mcp"),
    ("local_model", "sha256"),
)
"""What a baseline's manifest must share with the run that reuses its draws (the MCP servers'
tools are in the prompt; a reused attempt's verdict holds the checks of the baseline's
self-tests)."""

NOT_IN_A_BARE_DRAW = frozenset({"lessons", "case", "carry", "reflect", "insight", "generalise"})
"""Prompts only a shown lesson or case, a carried attempt, the reviewer or the curator reads:
a memory arm may word them otherwise than its baseline did (a study of how lessons are written
or shown, paired on one baseline), since no attempt it reuses read them."""


def _at(manifest: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        manifest = manifest.get(key) or {}
    return manifest if manifest != {} else None


@dataclass(frozen=True)
class Baseline:
    """The one run in a baseline's memory: called with a task, the attempts it made from the
    task's bare prompt, by trial."""

    reader: MemoryReader
    run_id: str
    strategy: str

    def __call__(self, task: Task) -> Drawn:
        made = self.reader.log.episode(episode_id(self.run_id, self.strategy, task.id))
        if made is None:
            return {}
        pairs = zip(made.attempts, made.verdicts, strict=False)
        return {a.trial: (a, v) for a, v in pairs if not a.lesson_ids}

    def share_self_tests(self, log: EpisodeLog, run_id: str) -> None:
        """The self-tests the baseline's run wrote, kept as run `run_id`'s: its reused attempts
        were checked against them, so its attempts made afresh are checked against them too."""
        for kept in self.reader.log.run_self_tests(self.run_id):
            if log.self_tests(run_id, kept["task_id"]) is None:
                log.keep_self_tests(run_id, kept["task_id"], kept)


def draws_from(directory: str, mine: dict[str, Any], own_log: Path) -> Baseline:
    """The one run logged in `directory`, refused unless it can stand in for this run's
    draws (`mine`: its manifest; `own_log`: the episode log it writes)."""
    flag = f"--draws-from {directory}"
    log = Path(directory).expanduser() / "episodes.db"
    if not log.is_file():
        raise UserError(f"{flag}: no episode log there; pass the --memory of the baseline's run")
    if log.resolve() == own_log.expanduser().resolve():
        raise UserError(
            f"{flag}: is this run's own --memory; the baseline's memory holds its run alone, "
            "so run the memory arm with a --memory of its own"
        )
    try:
        reader = MemoryReader(directory, flag)
    except OlderLog as older:  # the baseline is only read: its way round writes into a copy
        raise UserError(
            f"{flag}: the episode log was written by an older mulligan (it lacks migration "
            f"{older.missing}), and a baseline is only read, never brought up to date; bring "
            f"a copy up to date and draw from it: cp -a {directory} COPY && mulligan memory "
            "upgrade --memory COPY, then --draws-from COPY"
        ) from None
    runs = reader.runs()
    if len(runs) != 1:
        raise UserError(
            f"{flag}: holds {len(runs)} runs; pass the memory of one baseline run (a run of "
            "the same tasks with a strategy reading no store)"
        )
    run, theirs = runs[0], runs[0].manifest
    if run.status != "finished":
        raise UserError(
            f"{flag}: its run {run.id} did not finish ({run.status}), so some of its tasks "
            f"lack the draws this run would pair with; finish it first (its own command with "
            f"--resume {run.id})"
        )
    names = theirs.get("strategies") or []
    if len(names) != 1 or not _bare(names[0]):
        raise UserError(
            f"{flag}: its run used {', '.join(names) or 'no strategy'}; the baseline's strategy "
            "must read no store and carry nothing between trials (react, retry)"
        )
    for path in SAME:
        if (said := _at(theirs, path)) != (own := _at(mine, path)):
            raise UserError(
                f"{flag}: its {'.'.join(path)} is {'not recorded' if said is None else repr(said)}"
                f", this run's {'not recorded' if own is None else repr(own)}; a baseline's "
                "draws stand in only for the same model, sampling, budget, tools and self-tests"
            )
    prompts_theirs, prompts_mine = theirs.get("prompt_hashes", {}), mine.get("prompt_hashes", {})
    named = (prompts_theirs.keys() | prompts_mine.keys()) - NOT_IN_A_BARE_DRAW  # one's alone too
    changed = sorted(k for k in named if prompts_theirs.get(k) != prompts_mine.get(k))
    if changed:
        raise UserError(
            f"{flag}: its prompts differ from this mulligan's ({', '.join(changed)}); reuse "
            "draws only from a baseline run with the same prompts"
        )
    digests, wanted = theirs.get("task_digests") or {}, mine.get("task_digests") or {}
    unpaired = sorted(t for t in wanted if digests.get(t) != wanted[t])
    if unpaired:
        raise UserError(
            f"{flag}: its run did not attempt task {unpaired[0]!r} as this run states it"
            f"{'' if digests else ' (it recorded no task digests: an older mulligan)'}; a "
            "baseline's draws stand in only for the same tasks"
        )
    return Baseline(reader, run.id, names[0])


def _bare(name: str) -> bool:
    """A strategy whose every attempt starts from the bare prompt: it reads no store,
    carries no attempt and draws every trial alike."""
    s = strategies.for_loop(name)
    carries = s.uses_store or s.carries_attempt or s.carries_reflections or s.escalates
    return s.shares_first_attempt and not carries


def resolved_directory(directory: str) -> str:
    return str(Path(directory).expanduser().resolve())
