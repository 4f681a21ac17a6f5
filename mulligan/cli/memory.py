"""`mulligan memory ...` and `mulligan episodes ...`.

The actions that only read (list, search, show, stats, export, and `episodes`) change no
byte of the memory: they read the episode log opened read-only (`MemoryReader`) and its
lesson table, never chromadb, which writes to a store whenever it opens it
(`memory.store_reading`). A lesson store on a chroma server is read from the server.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from mulligan.cli import display
from mulligan.cli.output import marked, table
from mulligan.cli.pipeline import open_memory
from mulligan.defaults import DEFAULT_MEMORY
from mulligan.errors import UserError
from mulligan.inputs.memory_files import is_server, log_directory, memory_directory, memory_to_read
from mulligan.inputs.paths import output_file, write_whole
from mulligan.memory import Memory, assignment, make_embedder
from mulligan.memory.embeddings import spec_for
from mulligan.memory.lesson_file import lesson_lines
from mulligan.memory.log import EpisodeLog
from mulligan.memory.reading import MemoryReader, OlderLog
from mulligan.memory.store_reading import refuse_another, search_lessons, stored_embedding
from mulligan.memory.validity import ValiditySection, evidence_phrase, online_phrase
from mulligan.schema import Lesson
from mulligan.settings.loading import load_config
from mulligan.settings.run_config import RunConfig

if TYPE_CHECKING:
    from mulligan.memory.store import LessonStore

EMBEDDING_ACTIONS = ("search", "import", "verify", "mcp")
"""The only memory actions that embed text; the others read or update what is stored."""
READING_ACTIONS = ("list", "search", "show", "stats", "export")
"""The memory actions that only read: they write nothing to the memory."""


def _memory(args: argparse.Namespace, *, existing: bool = True) -> Memory:
    """The memory, to change it (retract, import, verify), embedding (import, verify) as
    the store was built unless --embedding (or MULLIGAN_EMBEDDING, mulligan.toml) says
    otherwise. `existing`: it must be there already (every action but import)."""
    config = load_config(vars(args))
    memory = open_memory(config, reading=True, existing=existing)
    if getattr(args, "action", None) in EMBEDDING_ACTIONS:
        built_with = memory.store.built_with
        memory.store.use(make_embedder(_embedding(config, built_with)))
    return memory


def _embedding(config: RunConfig, built_with: str | None) -> str:
    """The store's own embedding unless one is given."""
    explicit = config.given("run.embedding")
    return spec_for(built_with) if built_with and not explicit else config.run.embedding


class ReadMemory:
    """A memory opened only to read it: the log read-only, the lessons from its lesson table
    (or from a chroma server, when the store is one)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.config = load_config(vars(args))
        location = self.config.run.memory or DEFAULT_MEMORY
        memory_directory(location)
        memory_to_read(location)
        self.remote = location if is_server(location) else None
        self.directory = Path(log_directory(location, DEFAULT_MEMORY)).expanduser()
        self.where = self.remote or str(self.directory)

    @cached_property
    def reader(self) -> MemoryReader:
        """The episode log (a server's lessons are listed and searched without it)."""
        return MemoryReader(self.directory)

    def _server(self) -> LessonStore:
        from mulligan.memory.store import LessonStore  # chromadb loads for a server alone

        return LessonStore(str(self.remote), None)

    def lessons(self) -> list[Lesson]:
        return self._server().all() if self.remote else self.reader.stored_lessons()

    def lesson(self, lesson_id: str) -> Lesson | None:
        found = self._server().get([lesson_id]) if self.remote else []
        return found[0] if found else self.reader.lesson(lesson_id)

    def search(self, text: str, k: int) -> list[tuple[Lesson, float]]:
        if self.remote:
            store = self._server()
            store.use(make_embedder(_embedding(self.config, store.built_with)))
            return store.search(text, k)
        built_with = stored_embedding(self.directory / "lessons")
        embedder = make_embedder(_embedding(self.config, built_with))
        refuse_another(str(self.directory / "lessons"), built_with, embedder.name)
        return search_lessons(self.reader.stored_lessons(), embedder, text, k)


def lesson_line(lesson: Lesson) -> str:
    v, e = lesson.validity, lesson.validity.evidence
    return (
        f"{lesson.id}  {lesson.kind:<7} {v.status:<10} conf {v.confidence:.2f}  "
        f"verified +{e.helped}/-{e.hurt} of {e.pairs}  shown {v.retrieved} "
        f"(then passed {v.helped}, failed {v.hurt})  [{lesson.scope.family}] {lesson.text}"
    )


def lessons_table(found: Sequence[tuple[Lesson, float | None]], as_json: bool) -> None:
    """Lessons (with a similarity score from search): a table, plain lines, or JSON lines."""
    if as_json:
        for lesson, score in found:
            record = lesson.model_dump(mode="json")
            print(json.dumps(record if score is None else record | {"similarity": score}))
        return
    scored = any(score is not None for _, score in found)
    header = [*(["score"] if scored else []), "id", "kind", "status", "conf", "verified +/-"]
    header += ["shown (then passed/failed)"]
    rows, plain = [], []
    for lesson, score in found:
        v = lesson.validity
        shown = [f"{score:.3f}"] if score is not None else []
        rows.append(
            [*shown, lesson.id, lesson.kind, v.status, f"{v.confidence:.2f}",
             f"+{v.evidence.helped}/-{v.evidence.hurt} of {v.evidence.pairs}",
             f"{v.retrieved} ({v.helped}/{v.hurt})", lesson.scope.family or "-", lesson.text]
        )  # fmt: skip
        plain.append(f"{score:.3f}  {lesson_line(lesson)}" if scored else lesson_line(lesson))
    table([*header, "family", "lesson"], rows, plain, sys.stdout)


def show_lesson(
    lesson: Lesson, reader: MemoryReader, rules: ValiditySection, as_json: bool
) -> None:
    """One lesson and its history (events, the attempts assigned for it): JSON, or text."""
    events = list(reader.log.lesson_events(lesson.id))
    assigned = reader.log.assignments_of_lesson(lesson.id)
    if as_json:
        record = {"lesson": lesson.model_dump(mode="json"), "events": events}
        record["assignments"] = [dataclasses.asdict(a) for a in assigned]
        print(json.dumps(record, default=str))
        return
    v = lesson.validity
    print(f"{lesson.id}  {lesson.kind}  {v.status}  confidence {v.confidence:.2f}")
    print(f"  {lesson.text}")
    print(f"  scope: family {lesson.scope.family or '-'}, task {lesson.scope.task_id or '-'}")
    print(f"  online: {online_phrase(v)}")
    print(f"  {evidence_phrase(v)}")
    if lesson.case:
        for said, text in (
            ("answer that passed", lesson.case.answer),
            ("what its checks said", lesson.case.feedback),
        ):
            print(f"  {said}:\n" + "\n".join("    " + x for x in text.splitlines()))
    print(f"  source: task {lesson.source.task_id} episode {lesson.source.episode_id} "
          f"trial {lesson.source.trial} model {lesson.source.model}")  # fmt: skip
    print(f"  {assignment.summary(assigned)}")
    for half in assigned:
        print(f"    {assignment.line(half)}")
    chance = assignment.chance_line(assigned, reader.log.withheld_halves(), rules)
    if chance:
        print(f"  {chance}")
    for e in events:
        print(f"  {e['event']:<18} {e['episode_id']} trial {e['trial']} {e['detail']}")


def cmd_memory(args: argparse.Namespace) -> int:
    action = args.action
    if action == "export" and args.out:
        output_file(Path(args.out), "--out", EXPORT_REPLACES)
    if action in READING_ACTIONS:
        return _read(args, ReadMemory(args))
    if action == "upgrade":
        return upgrade(load_config(vars(args)).run.memory or DEFAULT_MEMORY)
    if action == "import":  # every line checked before the memory is even opened
        lines = lesson_lines(Path(_need(args.query, "import FILE.jsonl")))
    if action == "mcp":  # the endpoint first: nothing is created for a command that cannot run
        from mulligan.cli.memory_mcp import cmd_memory_mcp

        return cmd_memory_mcp(args, lambda: _memory(args, existing=False))
    memory = _memory(args, existing=action != "import")
    if action == "retract":
        retracted = memory.retract(_need(args.query, "retract ID").strip())
        if retracted is None:
            raise UserError(f"no lesson {args.query!r} in {memory.where}")
        lesson, now = retracted
        print(f"retracted {lesson.id}: {lesson.text}" if now else
              f"{lesson.id} was already retracted; nothing changed")  # fmt: skip
    elif action == "import":
        count = memory.import_jsonl(lines, trust=args.trust, source=args.query)
        state = "as exported (--trust)" if args.trust else "as new candidates"
        print(f"imported {count} lessons {state}")
    elif action == "verify":
        from mulligan.cli.verify import cmd_verify

        return cmd_verify(args, memory)
    return 0


def upgrade(location: str) -> int:
    """The episode log at `location` brought up to date. It is read first: one up to date, a
    newer mulligan's, or none at all is never opened to write (nor made)."""
    if is_server(location):
        raise UserError(
            f"--memory {location}: a chroma server holds lessons, not an episode log; pass "
            f"the directory whose log to bring up to date (runs with a server log in "
            f"{DEFAULT_MEMORY})"
        )
    memory_directory(location)
    memory_to_read(location)
    try:
        reader = MemoryReader(location)
    except OlderLog:
        log = EpisodeLog(Path(location).expanduser() / "episodes.db")
        log.close()  # every change in the file: a copy of episodes.db alone holds them
        applied = ", ".join(log.migrated) or "nothing: another process had"
        print(f"{log.path}: brought up to date (applied {applied})")
        return 0
    print(f"{reader.log.path}: already up to date; nothing changed")
    return 0


def _read(args: argparse.Namespace, memory: ReadMemory) -> int:
    action, as_json = args.action, args.json
    if action == "list":
        lessons_table([(lesson, None) for lesson in memory.lessons()], as_json)
    elif action == "search":
        lessons_table(memory.search(_need(args.query, "search TEXT"), args.k), as_json)
    elif action == "show":
        lesson_id = _need(args.query, "show ID").strip()  # as `episodes show` takes its ID
        found = memory.lesson(lesson_id)
        if found is None:
            raise UserError(f"no lesson {lesson_id!r} in {memory.where}")
        show_lesson(found, memory.reader, memory.config.validity, as_json)
    elif action == "export":
        export(memory.lessons(), args.out)
    elif action == "stats":
        stats(memory.lessons(), memory.where, as_json)
    return 0


def stats(lessons: list[Lesson], where: str, as_json: bool) -> None:
    counts: dict[str, collections.Counter[str]] = {
        "status": collections.Counter(lesson.validity.status for lesson in lessons),
        "family": collections.Counter(lesson.scope.family for lesson in lessons),
        "kind": collections.Counter(lesson.kind for lesson in lessons),
    }
    if as_json:
        by = {f"by_{name}": dict(found) for name, found in counts.items()}
        print(json.dumps({"lessons": len(lessons), "store": where, **by}))
        return
    print(f"{len(lessons)} lessons in {where}")
    for name, found in counts.items():  # (only a family may be "")
        print(f"by {name}: " + ", ".join(f"{k or '-'} {v}" for k, v in sorted(found.items())))


EXPORT_REPLACES = "write to standard output to replace it (mulligan memory export > FILE)"


def export(lessons: list[Lesson], out: str | None) -> None:
    """Every stored lesson as a JSON line, to standard output or a new file `out`."""
    lines = [lesson.model_dump_json() + "\n" for lesson in lessons]
    if out is None:
        sys.stdout.writelines(lines)
    elif os.path.lexists(out):  # made by someone else since it was checked
        raise UserError(f"--out {out}: appeared while the memory opened; it is kept")
    else:
        write_whole(Path(out), "".join(lines))  # a kill leaves no part of it taken for the whole


def _need(value: str | None, usage: str) -> str:
    if not value:
        raise UserError(f"usage: mulligan memory {usage}")
    return value


def cmd_episodes(args: argparse.Namespace) -> int:
    reader = ReadMemory(args).reader
    if args.action == "list":
        found = list(reader.log.episodes(args.run))
        if args.json:
            for row in found:
                print(json.dumps(dict(row), default=str))
            return 0
        rows, plain = [], []
        for row in found:
            mark = "PASS" if row["passed"] else "FAIL"
            rows.append(
                [row["id"], marked(mark), str(row["trials"]), row["strategy"], row["task_id"]]
            )
            trials = f"{row['trials']} trial(s)"
            plain.append(f"{row['id']}  {mark} after {trials}  {row['strategy']}  {row['task_id']}")
        table(["episode", "outcome", "trials", "strategy", "task"], rows, plain, sys.stdout)
        return 0
    episode = reader.log.episode(_need(args.episode, "episodes show ID").strip())
    if episode is None:
        raise UserError(f"no episode {args.episode!r} in {reader.directory}")
    print(f"episode {episode.id} · task {episode.task_id} · {episode.strategy}")
    for attempt, verdict in zip(episode.attempts, episode.verdicts, strict=False):
        for lesson in reader.log.lessons(attempt.lesson_ids):
            print(f"lesson given: {lesson.id}: {lesson.text}")
        print(display.trajectory(attempt))
        if attempt.changes:
            print("changes:\n" + attempt.changes.rstrip("\n"))
        print(display.verdict_line(attempt.task_id, verdict))
        if verdict.feedback:
            print("feedback:\n" + "\n".join("  " + line for line in verdict.feedback.splitlines()))
    for lesson in reader.log.lessons(episode.lessons_written):
        print(f"lesson written: {lesson.id}: {lesson.text}")
    return 0
