"""What a memory arm showed at a trial (trial 1 by default), task by task, and what it changed.

For every task of a transfer study's test phase, against an arm without memory (react): the
item the memory arm showed at that trial (a case or a lesson; its source task), its cosine
similarity to the task's prompt under the run's embedding, and whether that trial passed the
hidden checks with and without it. Then the tasks where something was shown, counted by
similarity band: helped (only the arm with memory passed), hurt (only the other passed),
same. A task either arm did not take to that trial (it had stopped) is left out. It reads
the episode log only; nothing calls a model.

    python benchmarks/shown_memory.py OUT/memory RUN_ID --arm memory-frozen-cases
    python benchmarks/shown_memory.py OUT/memory RUN_ID --arm memory-frozen-cases --bands 0.5,0.6
    python benchmarks/shown_memory.py OUT/memory RUN_ID --arm memory-frozen-cases-on-retry \
        --baseline retry --trial 2      # a memory read only after a failure, against resampling
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mulligan.memory.embeddings import make_embedder
from mulligan.memory.log import EpisodeLog
from mulligan.memory.store_reading import cosine
from mulligan.schema import Episode, Lesson
from mulligan.tasks.suites import load_suite


def passed_at(episode: Episode | None, trial: int) -> bool | None:
    """The hidden verdict of the episode's attempt `trial` (None: it made no such attempt)."""
    if episode is None or len(episode.verdicts) < trial:
        return None
    return episode.verdicts[trial - 1].passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("memory", type=Path, help="the study's memory directory")
    parser.add_argument("run_id")
    parser.add_argument("--arm", default="memory-frozen-cases", help="the memory arm")
    parser.add_argument("--baseline", default="react", help="the arm without memory")
    parser.add_argument("--bands", default="0.5,0.6,0.7", help="similarity band edges")
    parser.add_argument("--trial", type=int, default=1, help="the trial compared (default 1)")
    args = parser.parse_args()
    log = EpisodeLog(args.memory / "episodes.db", read_only=True)
    run = log.run(args.run_id)
    if run is None:
        raise SystemExit(f"{args.run_id}: no such run in {args.memory / 'episodes.db'}")
    manifest = json.loads(run["manifest"])
    embedder = make_embedder(str(manifest["config"]["run"]["embedding"]))
    prompts = {t.id: t.prompt for t in load_suite(manifest["suite"], data=manifest["data"]).tasks}
    edges = [float(x) for x in args.bands.split(",")]
    rows: list[tuple[str, str, str, bool | None, bool | None]] = []
    counts: dict[int, dict[str, int]] = {}
    for task_id in manifest["task_order"]:
        arm = log.episode(f"{args.run_id}:{args.arm}:{task_id}")
        base = log.episode(f"{args.run_id}:{args.baseline}:{task_id}")
        with_, without = passed_at(arm, args.trial), passed_at(base, args.trial)
        if arm is None or with_ is None or without is None:
            continue
        shown: list[Lesson] = log.lessons(arm.attempts[args.trial - 1].lesson_ids)
        if not shown:
            rows.append((task_id, "-", "", with_, without))
            continue
        item = shown[0]
        vectors = embedder.embed([prompts[task_id], item.text])
        similarity = cosine(vectors[0], vectors[1])
        rows.append((task_id, f"{item.kind} from {item.source.task_id}", f"{similarity:.2f}",
                     with_, without))  # fmt: skip
        band = sum(similarity >= edge for edge in edges)
        outcome = "helped" if with_ and not without else "hurt" if without and not with_ else "same"
        counts.setdefault(band, {"helped": 0, "hurt": 0, "same": 0})[outcome] += 1
    print(f"| task | shown at trial {args.trial} | similarity | {args.arm} | {args.baseline} |")
    print("|---|---|---|---|---|")
    for task_id, what, shown_similarity, with_, without in rows:
        print(f"| {task_id} | {what} | {shown_similarity} | {with_} | {without} |")
    print()
    print("| similarity | shown | helped | hurt | same |")
    print("|---|---|---|---|---|")
    labels = [f"< {edges[0]}"] + [
        f"{low}-{high}" for low, high in zip(edges, [*edges[1:], 1.0], strict=True)
    ]
    for band, label in enumerate(labels):
        c = counts.get(band, {"helped": 0, "hurt": 0, "same": 0})
        print(f"| {label} | {sum(c.values())} | {c['helped']} | {c['hurt']} | {c['same']} |")


if __name__ == "__main__":
    main()
