"""The lesson store at 1k, 10k and 100k lessons against a brute-force numpy baseline.

Scale runs use random unit vectors (384 dimensions, like MiniLM) so that only the
store is measured: add throughput, and search p50/p95 over 200 queries without
and with metadata filters (family + usable status, as retrieval before an attempt
uses). The baseline is exact cosine top-k in numpy over the same vectors. The last two
columns are the median CPU milliseconds of this process per search (steadier than wall time
on a machine busy with other work).
Quality at 1k uses real MiniLM embeddings: how many of the exact top-5 the store
returns (recall@5). Last, the default embedding's throughput on 200-character
texts.

    python benchmarks/retrieval.py [--sizes 1000,10000,100000] [--queries 200]
        [--store DIR] [--scale-only]

`--store DIR` keeps the store there and reuses the lessons it already holds (building 100k
takes minutes), so two versions of the code can be measured on the very same store.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

import numpy as np

from mulligan.memory.embeddings import MiniLMEmbedding
from mulligan.memory.store import LessonStore
from mulligan.schema import Lesson, LessonScope

DIMENSIONS = 384
FAMILIES = [f"family-{n}" for n in range(10)]


class TableEmbedding:
    """Vectors looked up by text: lessons and queries get fixed random unit vectors."""

    name = "table-384"

    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray] = {}

    def add(self, texts: list[str], matrix: np.ndarray) -> None:
        self.vectors.update(zip(texts, matrix, strict=True))

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t].tolist() for t in texts]


def unit(rows: int, rng: np.random.Generator) -> np.ndarray:
    matrix = rng.standard_normal((rows, DIMENSIONS)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[int(0.95 * (len(ordered) - 1))] * 1e3


def lessons_for(texts: list[str], start: int) -> list[Lesson]:
    return [
        Lesson(id=f"l{start + n}", text=text, scope=LessonScope(family=FAMILIES[(start + n) % 10]))
        for n, text in enumerate(texts)
    ]


def scale(sizes: list[int], queries: int, directory: str | None = None) -> None:
    rng = np.random.default_rng(0)
    embedding = TableEmbedding()
    matrix = unit(max(sizes), rng)
    texts = [f"lesson {n}" for n in range(max(sizes))]
    embedding.add(texts, matrix)
    query_texts = [f"query {n}" for n in range(queries)]
    query_matrix = unit(queries, rng)
    embedding.add(query_texts, query_matrix)
    families = np.array([n % 10 for n in range(max(sizes))])
    header = (
        f"{'lessons':>8} {'add/s':>8} {'store p50':>10} {'p95 ms':>7} {'filtered p50':>13} "
        f"{'p95 ms':>7} {'numpy p50':>10} {'p95 ms':>7} {'numpy filt p95':>15} "
        f"{'store cpu':>9} {'filt cpu':>9}"
    )
    print(header)
    with tempfile.TemporaryDirectory() as home:
        store = LessonStore(directory or home, embedding)  # type: ignore[arg-type]
        have = store.count()
        for size in sizes:
            started = time.perf_counter()
            store.put(lessons_for(texts[have:size], have))
            rate = (size - have) / (time.perf_counter() - started) if size > have else 0.0
            have = max(have, size)
            for text in query_texts[:5]:  # warm-up: opening, loading the index
                store.similar(text, 5)
                store.search(text, 5, family=FAMILIES[0])
            plain, filtered, exact, exact_filtered = [], [], [], []
            plain_cpu, filtered_cpu = [], []
            for n, text in enumerate(query_texts):
                family = FAMILIES[n % 10]
                started, cpu = time.perf_counter(), time.process_time()
                store.similar(text, 5)
                plain.append(time.perf_counter() - started)
                plain_cpu.append(time.process_time() - cpu)
                started, cpu = time.perf_counter(), time.process_time()
                store.search(text, 5, family=family)
                filtered.append(time.perf_counter() - started)
                filtered_cpu.append(time.process_time() - cpu)
                started = time.perf_counter()
                scores = matrix[:size] @ query_matrix[n]
                np.argpartition(-scores, 5)[:5]
                exact.append(time.perf_counter() - started)
                started = time.perf_counter()
                mask = families[:size] == n % 10
                scores = matrix[:size][mask] @ query_matrix[n]
                np.argpartition(-scores, 5)[:5]
                exact_filtered.append(time.perf_counter() - started)
            p = [percentiles(x) for x in (plain, filtered, exact, exact_filtered)]
            cpu_ms = [percentiles(x)[0] for x in (plain_cpu, filtered_cpu)]
            print(
                f"{size:>8} {rate:>8.0f} {p[0][0]:>10.2f} {p[0][1]:>7.2f} {p[1][0]:>13.2f} "
                f"{p[1][1]:>7.2f} {p[2][0]:>10.2f} {p[2][1]:>7.2f} {p[3][1]:>15.2f} "
                f"{cpu_ms[0]:>9.2f} {cpu_ms[1]:>9.2f}"
            )


TOPICS = [
    "empty lists", "off-by-one loops", "unit conversion", "string parsing", "file paths",
    "rounding floats", "sorting stability", "recursion depth", "date formats", "regex escapes",
]  # fmt: skip
VERBS = ["check", "handle", "test", "validate", "document", "avoid mistakes with", "think about"]
WHEN = ["before answering", "in the first step", "when tests fail", "for edge cases", "always"]


def quality(count: int = 1000, queries: int = 100) -> None:
    embedder = MiniLMEmbedding()
    rng = random.Random(0)
    texts = [
        f"{rng.choice(VERBS).capitalize()} {rng.choice(TOPICS)} {rng.choice(WHEN)} ({n})."
        for n in range(count)
    ]
    asked = [f"How should I deal with {rng.choice(TOPICS)}?" for _ in range(queries)]
    with tempfile.TemporaryDirectory() as home:
        store = LessonStore(home, embedder)  # type: ignore[arg-type]
        store.put([Lesson(id=f"q{n}", text=t) for n, t in enumerate(texts)])
        vectors = np.array(embedder.embed(texts))
        found = 0
        for question in asked:
            query = np.array(embedder.embed([question])[0])
            exact = {f"q{i}" for i in np.argsort(-(vectors @ query))[:5]}
            got = {lesson.id for lesson, _ in store.similar(question, 5)}
            found += len(exact & got)
    recall = found / (5 * queries)
    print(f"quality at {count} MiniLM lessons: recall@5 of the store against exact = {recall:.3f}")


def embedding_speed(count: int = 400) -> None:
    embedder = MiniLMEmbedding()
    rng = random.Random(1)
    words = ["agent", "check", "edge", "cases", "before", "answering", "verify", "units"]
    words += ["lists", "strings", "files"]
    texts = [" ".join(rng.choice(words) for _ in range(40))[:200] for _ in range(count)]
    embedder.embed(texts[:32])  # warm-up
    started = time.perf_counter()
    embedder.embed(texts)
    rate = count / (time.perf_counter() - started)
    print(f"default embedding (minilm, onnxruntime): {rate:.0f} texts/s for 200-character texts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--store", help="keep the store in this directory and reuse it")
    parser.add_argument("--scale-only", action="store_true", help="skip the MiniLM parts")
    args = parser.parse_args()
    scale([int(x) for x in args.sizes.split(",")], args.queries, args.store)
    if not args.scale_only:
        quality()
        embedding_speed()


if __name__ == "__main__":
    main()
