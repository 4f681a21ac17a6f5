"""Could a model gate the lessons a persistent agent was shown? Asks it, for every attempt of a
paired persistent study (`persistent_agent.py --paired`) that was shown a lesson, whether the
lesson applies to the task, and counts its yes against what the attempt and the baseline's
own draw at the same task and trial did.

    python benchmarks/lesson_applies.py STUDY --question results/lesson-applies-fits.txt \\
        --data mbpp-py.jsonl --base-url http://127.0.0.1:8031/v1 --model qwen2.5-coder-1.5b

The question is a text file with `{{ task }}`, `{{ lesson }}` and `{{ source }}` (the prompt
of the task the lesson was written on) in it; the reply is read as yes when it starts with
"yes". The study's logs are only read.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections import Counter
from pathlib import Path

from openai import OpenAI

from mulligan.tasks.suites import load_suite

QUERY = (
    "select e.task_id, a.trial, a.passed, a.lesson_ids from attempts a "
    "join episodes e on e.id = a.episode_id where e.run_id = ? and a.lesson_ids != '[]'"
)


def read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def shown_attempts(study: Path) -> list[tuple[str, int, bool, bool | None, str]]:
    """(task, trial, passed, the baseline's draw passed or None, lesson id) per lesson shown."""
    rows = []
    memory = read_only(study / "memory" / "episodes.db")
    for n in range(1, 1000):
        kept = study / f"session-{n}-memory.json"
        if not kept.exists():
            break
        run_id = json.loads(kept.read_text())[0]
        baseline = read_only(study / f"baseline-{n}" / "episodes.db")
        draws = {
            (task, trial): bool(passed)
            for task, trial, passed in baseline.execute(
                "select e.task_id, a.trial, a.passed from attempts a "
                "join episodes e on e.id = a.episode_id"
            )
        }
        for task, trial, passed, ids in memory.execute(QUERY, [run_id]):
            for lesson in json.loads(ids):
                rows.append((task, trial, bool(passed), draws.get((task, trial)), lesson))
    return rows


def outcome(passed: bool, draw: bool | None) -> str:
    """What showing the lesson did, against the baseline's draw at the same task and trial."""
    if draw is None:
        return "no draw"
    if draw != passed:
        return "helped" if passed else "hurt"
    return "same"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", type=Path, help="a paired persistent study's directory")
    parser.add_argument("--question", type=Path, required=True)
    parser.add_argument("--suite", default="mbpp")
    parser.add_argument("--data", help="the suite's data file")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    template = args.question.read_text()
    tasks = {task.id: task for task in load_suite(args.suite, data=args.data).tasks}
    memory = read_only(args.study / "memory" / "episodes.db")
    texts = dict(memory.execute("select id, text from lessons"))
    sources = {
        id_: json.loads(record)["source"]["task_id"]
        for id_, record in memory.execute("select id, record from lessons")
    }
    client = OpenAI(base_url=args.base_url, api_key="none")
    said: Counter[tuple[str, bool]] = Counter()
    for task, trial, passed, draw, lesson in shown_attempts(args.study):
        source = tasks.get(sources[lesson])
        question = (
            template.replace("{{ task }}", tasks[task].prompt)
            .replace("{{ lesson }}", texts[lesson])
            .replace("{{ source }}", source.prompt if source else "(not in this suite)")
        )
        reply = client.chat.completions.create(
            model=args.model,
            messages=[{"role": "user", "content": question}],
            temperature=0,
            max_tokens=8,
        )
        applies = (reply.choices[0].message.content or "").strip().lower().startswith("yes")
        pair = outcome(passed, draw)
        said[(pair, applies)] += 1
        print(f"{task} trial {trial}: {pair:7} applies={applies} | {texts[lesson][:80]}")
    total = sum(said.values())
    print(f"said it applies: {sum(n for (_, yes), n in said.items() if yes)} of {total}")
    for pair in ("hurt", "helped", "same", "no draw"):
        yes, all_ = said[(pair, True)], said[(pair, True)] + said[(pair, False)]
        print(f"  where the shown attempt {pair}: {yes} of {all_}")


if __name__ == "__main__":
    main()
