"""`mulligan memory ...` and `mulligan episodes ...`."""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from mulligan import display
from mulligan.cli_tasks import open_memory
from mulligan.config import load_settings
from mulligan.errors import UserError
from mulligan.memory import Memory, make_embedder
from mulligan.memory.embeddings import spec_for
from mulligan.schema import Lesson

EMBEDDING_ACTIONS = ("search", "import")
"""The only memory actions that embed text; the others read or update what is stored."""


def _memory(args: argparse.Namespace) -> Memory:
    """The memory, embedding (for search and import) as the store was built unless
    --embedding (or MULLIGAN_EMBEDDING, mulligan.toml) says otherwise."""
    settings = load_settings(vars(args))
    memory = open_memory(settings, reading=True)
    if getattr(args, "action", None) in EMBEDDING_ACTIONS:
        built_with = memory.store.built_with
        explicit = "embedding" in settings.model_fields_set
        spec = spec_for(built_with) if built_with and not explicit else settings.embedding
        memory.store.use(make_embedder(spec))
    return memory


def lesson_line(lesson: Lesson) -> str:
    v = lesson.validity
    return (
        f"{lesson.id}  {lesson.kind:<7} {v.status:<10} conf {v.confidence:.2f}  "
        f"+{v.helped}/-{v.hurt} used {v.retrieved}  [{lesson.scope.family}] {lesson.text}"
    )


def cmd_memory(args: argparse.Namespace) -> int:
    memory = _memory(args)
    action = args.action
    if action == "list":
        for lesson in memory.store.all():
            print(lesson_line(lesson))
    elif action == "search":
        for lesson, score in memory.store.search(_need(args.query, "search TEXT"), args.k):
            print(f"{score:.3f}  {lesson_line(lesson)}")
    elif action == "show":
        print(json.dumps(_lesson(memory, _need(args.query, "show ID")).model_dump(), indent=2))
        for e in memory.log.lesson_events(args.query):
            print(f"  {e['event']:<18} {e['episode_id']} trial {e['trial']} {e['detail']}")
    elif action == "retract":
        retracted = memory.retract(_need(args.query, "retract ID"))
        if retracted is None:
            raise UserError(f"no lesson {args.query!r} in {memory.where}")
        print(f"retracted {retracted.id}: {retracted.text}")
    elif action == "export":
        out = open(args.out, "w") if args.out else sys.stdout  # noqa: SIM115
        for line in memory.store.export_jsonl():
            out.write(line + "\n")
        if args.out:
            out.close()
    elif action == "import":
        path = Path(_need(args.query, "import FILE.jsonl"))
        if not path.exists():
            raise UserError(f"{path}: no such file")
        count = memory.import_jsonl(path.read_text().splitlines(), trust=args.trust)
        state = "as exported (--trust)" if args.trust else "as new candidates"
        print(f"imported {count} lessons {state}")
    elif action == "stats":
        lessons = memory.store.all()
        statuses = collections.Counter(lesson.validity.status for lesson in lessons)
        families = collections.Counter(lesson.scope.family for lesson in lessons)
        print(f"{len(lessons)} lessons in {memory.where}")
        print("by status: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
        print("by family: " + ", ".join(f"{k or '-'} {v}" for k, v in sorted(families.items())))
    return 0


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
        for row in memory.log.episodes(args.run):
            mark = "PASS" if row["passed"] else "FAIL"
            trials = f"{row['trials']} trial(s)"
            print(f"{row['id']}  {mark} after {trials}  {row['strategy']}  {row['task_id']}")
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


def add_parsers(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    memory = commands.add_parser("memory", help="lessons: list, search, show, retract, ...")
    memory.add_argument(
        "action", choices=["list", "search", "show", "retract", "export", "import", "stats"]
    )
    memory.add_argument("query", nargs="?", help="text (search), lesson id, or file (import)")
    memory.add_argument("--k", type=int, default=5, help="results for search")
    memory.add_argument("--out", help="file for export (default: standard output)")
    memory.add_argument(
        "--trust",
        action="store_true",
        help="import: keep status and counters as exported (default: fresh candidates)",
    )
    memory.add_argument("--memory", help="memory directory or chroma URL (default ~/.mulligan)")
    memory.add_argument(
        "--embedding", help="search, import: embed with this (default: as the store was built)"
    )
    memory.set_defaults(handler=cmd_memory)

    episodes = commands.add_parser("episodes", help="episodes: list, show a trajectory")
    episodes.add_argument("action", choices=["list", "show"])
    episodes.add_argument("episode", nargs="?", help="episode id (show)")
    episodes.add_argument("--run", help="only this run's episodes")
    episodes.add_argument("--memory", help="memory directory (default ~/.mulligan)")
    episodes.add_argument("--embedding", help=argparse.SUPPRESS)
    episodes.set_defaults(handler=cmd_episodes)
