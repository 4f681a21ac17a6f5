"""Per strategy of a run: how trial 1 failed (visible checks failed, only hidden ones, no
visible check), later trials made after a visible pass, rescues, and how many submitted and
any-attempt answers passed. Reads the log only.

    python benchmarks/first_trials.py OUT/memory/episodes.db RUN_ID
"""

from __future__ import annotations

import itertools
import sys
from collections import Counter

from mulligan.memory.log import EpisodeLog

KINDS = {
    None: "trial 1 failed, no visible check",
    True: "trial 1 failed, only hidden checks",
    False: "trial 1 failed a visible check",
}


def main(path: str, run_id: str) -> None:
    log = EpisodeLog(path)
    counts: dict[str, Counter[str]] = {}
    for row in log.episodes(run_id):
        episode = log.episode(row["id"])
        if episode is None or not row["ended_at"] or not episode.verdicts:
            continue
        count = counts.setdefault(episode.strategy, Counter())
        first = episode.verdicts[0]
        count["tasks"] += 1
        count["trial 1 passed" if first.passed else KINDS[first.visible_passed]] += 1
        count["attempts"] += len(episode.attempts)
        pairs = itertools.pairwise(episode.verdicts)
        count["trials after a visible pass"] += sum(a.visible_passed is not False for a, _ in pairs)
        count["rescued"] += int(not first.passed and episode.passed)
        count["submitted passed"] += int(episode.passed)
        count["any attempt passed"] += int(any(v.passed for v in episode.verdicts))
    for strategy, count in counts.items():
        print(strategy, ", ".join(f"{key}: {n}" for key, n in count.items()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
