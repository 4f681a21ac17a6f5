"""`mulligan memory ...` and `mulligan episodes ...`."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from mulligan.cli import display
from mulligan.cli.output import marked, table
from mulligan.cli.pipeline import open_memory
from mulligan.errors import UserError
from mulligan.inputs.paths import output_file
from mulligan.memory import Memory, assignment, make_embedder
from mulligan.memory.embeddings import spec_for
from mulligan.memory.lesson_file import lesson_lines
from mulligan.memory.validity import evidence_phrase, online_phrase
from mulligan.schema import Lesson
from mulligan.settings.loading import load_config

EMBEDDING_ACTIONS = ("search", "import", "verify", "mcp")
"""The only memory actions that embed text; the others read or update what is stored."""


def _memory(args: argparse.Namespace, *, existing: bool = True) -> Memory:
    """The memory, embedding (for search and import) as the store was built unless
    --embedding (or MULLIGAN_EMBEDDING, mulligan.toml) says otherwise. `existing`: it must be
    there already (every action but import)."""
    config = load_config(vars(args))
    memory = open_memory(config, reading=True, existing=existing)
    if getattr(args, "action", None) in EMBEDDING_ACTIONS:
        built_with = memory.store.built_with
        explicit = config.given("run.embedding")
        spec = spec_for(built_with) if built_with and not explicit else config.run.embedding
        memory.store.use(make_embedder(spec))
    return memory


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


def show_lesson(lesson: Lesson, memory: Memory, as_json: bool) -> None:
    """One lesson and its history: JSON (record and events), or text."""
    events = list(memory.log.lesson_events(lesson.id))
    assigned = memory.in_work.of_lesson(lesson.id)
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
        print(
            "  answer that passed:\n"
            + "\n".join("    " + x for x in lesson.case.answer.splitlines())
        )
        print(
            "  what its checks said:\n"
            + "\n".join("    " + x for x in lesson.case.feedback.splitlines())
        )
    print(f"  source: task {lesson.source.task_id} episode {lesson.source.episode_id} "
          f"trial {lesson.source.trial} model {lesson.source.model}")  # fmt: skip
    print(f"  {assignment.summary(assigned)}")
    for half in assigned:
        print(f"    {assignment.line(half)}")
    chance = assignment.chance_line(v.evidence.pairs, memory.in_work.withheld(), memory.rules)
    if chance and assigned:
        print(f"  {chance}")
    for e in events:
        print(f"  {e['event']:<18} {e['episode_id']} trial {e['trial']} {e['detail']}")


def cmd_memory(args: argparse.Namespace) -> int:
    action = args.action
    if action == "import":  # every line checked before the memory is even opened
        lines = lesson_lines(Path(_need(args.query, "import FILE.jsonl")))
    if action == "export" and args.out:
        output_file(Path(args.out), "--out", EXPORT_REPLACES)
    if action == "mcp":  # the endpoint first: nothing is created for a command that cannot run
        from mulligan.cli.memory_mcp import cmd_memory_mcp

        return cmd_memory_mcp(args, lambda: _memory(args, existing=False))
    memory = _memory(args, existing=action != "import")
    as_json = getattr(args, "json", False)
    if action == "list":
        lessons_table([(lesson, None) for lesson in memory.store.all()], as_json)
    elif action == "search":
        lessons_table(memory.store.search(_need(args.query, "search TEXT"), args.k), as_json)
    elif action == "show":
        show_lesson(_lesson(memory, _need(args.query, "show ID")), memory, as_json)
    elif action == "retract":
        retracted = memory.retract(_need(args.query, "retract ID"))
        if retracted is None:
            raise UserError(f"no lesson {args.query!r} in {memory.where}")
        print(f"retracted {retracted.id}: {retracted.text}")
    elif action == "export":
        export(memory, args.out)
    elif action == "import":
        count = memory.import_jsonl(lines, trust=args.trust, source=args.query)
        state = "as exported (--trust)" if args.trust else "as new candidates"
        print(f"imported {count} lessons {state}")
    elif action == "verify":
        from mulligan.cli.verify import cmd_verify

        return cmd_verify(args, memory)
    elif action == "stats":
        lessons = memory.store.all()
        statuses = collections.Counter(lesson.validity.status for lesson in lessons)
        families = collections.Counter(lesson.scope.family for lesson in lessons)
        kinds = collections.Counter(lesson.kind for lesson in lessons)
        if as_json:
            print(
                json.dumps(
                    {
                        "lessons": len(lessons),
                        "store": memory.where,
                        "by_status": dict(statuses),
                        "by_family": dict(families),
                        "by_kind": dict(kinds),
                    }
                )
            )
            return 0
        print(f"{len(lessons)} lessons in {memory.where}")
        print("by status: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
        print("by family: " + ", ".join(f"{k or '-'} {v}" for k, v in sorted(families.items())))
        print("by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    return 0


EXPORT_REPLACES = "write to standard output to replace it (mulligan memory export > FILE)"


def export(memory: Memory, out: str | None) -> None:
    """Every stored lesson as a JSON line, to standard output or a new file `out`."""
    lines = (lesson.model_dump_json() for lesson in memory.store.all())
    if out is None:
        for line in lines:
            sys.stdout.write(line + "\n")
        return
    try:
        handle = open(out, "x", encoding="utf-8")  # noqa: SIM115 (closed below)
    except FileExistsError as exc:  # made by someone else since it was checked
        raise UserError(f"--out {out}: appeared while the memory opened; it is kept") from exc
    with handle:
        for line in lines:
            handle.write(line + "\n")


def _need(value: str | None, usage: str) -> str:
    if not value:
        raise UserError(f"usage: mulligan memory {usage}")
    return value


def _lesson(memory: Memory, lesson_id: str) -> Lesson:
    found = memory.store.get([lesson_id]) or memory.lessons([lesson_id])
    if not found:
        raise UserError(f"no lesson {lesson_id!r} in {memory.where}")
    return found[0]


def cmd_episodes(args: argparse.Namespace) -> int:
    memory = _memory(args)
    if args.action == "list":
        found = list(memory.log.episodes(args.run))
        if getattr(args, "json", False):
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
    episode = memory.load_episode(_need(args.episode, "episodes show ID").strip())
    if episode is None:
        raise UserError(f"no episode {args.episode!r} in {memory.directory}")
    print(f"episode {episode.id} · task {episode.task_id} · {episode.strategy}")
    for attempt, verdict in zip(episode.attempts, episode.verdicts, strict=False):
        for lesson in memory.lessons(attempt.lesson_ids):
            print(f"lesson given: {lesson.id}: {lesson.text}")
        print(display.trajectory(attempt))
        if attempt.changes:
            print("changes:\n" + attempt.changes.rstrip("\n"))
        print(display.verdict_line(attempt.task_id, verdict))
        if verdict.feedback:
            print("feedback:\n" + "\n".join("  " + line for line in verdict.feedback.splitlines()))
    for lesson in memory.lessons(episode.lessons_written):
        print(f"lesson written: {lesson.id}: {lesson.text}")
    return 0
