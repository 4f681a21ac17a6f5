"""HotpotQA (official JSON, distractor setting): each question's paragraphs are its corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from mulligan.errors import UserError
from mulligan.schema import ExactMatchCheck, Task
from mulligan.tasks.rows import read_json_list, refuse_repeats, text_fields

CONTEXT = "a list of [title, [sentence, ...]]"
FORM = (
    "(HotpotQA format: an object with text fields '_id', 'question', 'answer' and "
    f"'context', {CONTEXT})"
)
INSTRUCTIONS = (
    "Answer the question. Use search[entity] to open a paragraph by its title and "
    "lookup[keyword] to find sentences in it. Give a short final answer (a name, a date, "
    "yes or no), not a sentence."
)


def hotpotqa_tasks(path: Path, feedback: Literal["em", "hidden"] = "em") -> list[Task]:
    """`em`: success or failure is shown (the Reflexion paper's setting); `hidden`: nothing."""
    if not path.exists():
        raise UserError(f"{path}: no such file; hotpotqa needs the official JSON (--data PATH)")
    tasks, rows = [], read_json_list(path, "HotpotQA question")
    for line, row in rows:
        where = f"{path}:{line}"
        if not isinstance(row, dict):
            raise UserError(f"{where}: expected a question {FORM}, got {type(row).__name__}")
        text_fields(row, where, ("_id", "question", "answer"), (), "HotpotQA")
        documents = _documents(row.get("context"))
        if documents is None:
            raise UserError(f"{where}: field 'context' must be {CONTEXT} (HotpotQA format)")
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
    refuse_repeats(path, "_id", ((line, row["_id"]) for line, row in rows))
    return tasks


def _documents(context: Any) -> dict[str, str] | None:
    """The paragraphs by title, or None when `context` is not a list of [title, sentences]."""
    if not isinstance(context, list):
        return None
    documents = {}
    for pair in context:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            return None
        title, sentences = pair
        if not (isinstance(sentences, list) and all(isinstance(s, str) for s in sentences)):
            return None
        documents[title] = " ".join(s.strip() for s in sentences)
    return documents
