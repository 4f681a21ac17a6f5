"""HotpotQA (official JSON, distractor setting): each question's paragraphs are its corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from mulligan.errors import UserError
from mulligan.inputs.paths import read_text
from mulligan.schema import ExactMatchCheck, Task

INSTRUCTIONS = (
    "Answer the question. Use search[entity] to open a paragraph by its title and "
    "lookup[keyword] to find sentences in it. Give a short final answer (a name, a date, "
    "yes or no), not a sentence."
)


def hotpotqa_tasks(path: Path, feedback: Literal["em", "hidden"] = "em") -> list[Task]:
    """`em`: success or failure is shown (the Reflexion paper's setting); `hidden`: nothing."""
    if not path.exists():
        raise UserError(f"{path}: no such file; hotpotqa needs the official JSON (--data PATH)")
    try:
        rows = json.loads(read_text(path, "HotpotQA JSON file"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from exc
    if not isinstance(rows, list):
        raise UserError(f"{path}: expected a JSON list of HotpotQA questions")
    tasks = []
    for position, row in enumerate(rows):
        try:
            documents = {
                title: " ".join(s.strip() for s in sentences) for title, sentences in row["context"]
            }
            tasks.append(
                Task(
                    id=f"hotpotqa/{row['_id']}",
                    family="hotpotqa",
                    prompt=f"{INSTRUCTIONS}\n\nQuestion: {row['question']}",
                    tools=["search", "lookup"],
                    documents=documents,
                    checks=[
                        ExactMatchCheck(
                            name="exact match",
                            answer=row["answer"],
                            reveal=False,
                            visibility="feedback" if feedback == "em" else "hidden",
                        )
                    ],
                    metadata={
                        "type": row.get("type"),
                        "level": row.get("level"),
                        "answer": row["answer"],
                    },
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"{path}: question {position}: not in HotpotQA format ({exc})") from exc
    return tasks
