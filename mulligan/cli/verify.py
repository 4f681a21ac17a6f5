"""`mulligan memory verify TASKS`: each candidate lesson, and each validated one again,
paired, with it and without it, on the given tasks it is retrieved for
(mulligan/studies/verify.py); what each pair showed is printed and kept in the lesson's
validity, so a validated lesson that now hurts is demoted."""

from __future__ import annotations

import argparse
import sys

from mulligan.cli.pipeline import connect_models, remove_leftovers, running
from mulligan.errors import UserError
from mulligan.loop import Loop
from mulligan.memory import Memory
from mulligan.memory.validity import ACTIVE
from mulligan.runs.build import box_policy, loop_for, loop_settings
from mulligan.runs.lifecycle import manifest, new_run_id
from mulligan.settings.loading import load_config
from mulligan.studies.verify import luck, luck_line, verify
from mulligan.tasks.suites import load_suite, select


def cmd_verify(args: argparse.Namespace, memory: Memory) -> int:
    config = load_config(vars(args))
    if not args.query:
        raise UserError("usage: mulligan memory verify TASKS (a suite or task file) [--ids ...]")
    suite = load_suite(args.query, data=args.data, feedback="em")
    ids = [i.strip() for i in args.ids.split(",")] if args.ids else None
    suite.tasks = select(suite.tasks, ids=ids, limit=args.limit, sample=args.sample, seed=args.seed)
    lessons = [x for x in memory.store.all() if x.validity.status in ACTIVE]
    if not lessons:
        print(f"no candidate or validated lesson in {memory.where}: nothing to verify")
        return 0
    model, reflector = connect_models(config)
    run_id = args.resume or f"verify-{new_run_id(None)}"
    wanted = manifest(
        config, command="memory verify", suite=args.query, tasks=[t.id for t in suite.tasks]
    )
    policy = suite.hidden(box_policy(config))

    def make_loop(strategy: str) -> Loop:
        return loop_for(
            config, model, strategy, memory, run_id,
            policy=policy, reflector=reflector, extra_tools=suite.tools, trials=1,
        )  # fmt: skip

    remove_leftovers([memory.log.path.parent])  # its attempts work in marked directories too
    with running(memory.log, run_id, wanted, resume=bool(args.resume)):
        print(f"run id: {run_id}", file=sys.stderr)
        found = verify(
            memory, lessons, suite.tasks, make_loop, run_id,
            k=loop_settings(config, "react").retrieved_lessons,
            min_similarity=config.loop.min_similarity, pairs=config.memory.verify_pairs,
            concurrency=config.run.concurrency, statuses=ACTIVE,
        )  # fmt: skip
    verified = memory.lessons([x.id for x in lessons])
    for lesson in verified:
        e = lesson.validity.evidence
        tried = found.tried.get(lesson.id)
        where = f"on {', '.join(tried)}" if tried else "retrieved for none of these tasks"
        print(
            f"{lesson.id}  {lesson.validity.status:<10} pairs {e.pairs}, helped {e.helped}, "
            f"hurt {e.hurt} ({where})  {lesson.text}"
        )
    chance = luck(verified, found.without, memory.rules)
    if chance:
        print(luck_line(chance))
    elif found.tried:
        print("no attempt without a lesson told anything (no visible check, or the endpoint "
              "failed): no pair was counted")  # fmt: skip
    return 0
