"""A chroma server answers "Nothing found on disk" while a collection another process just
made has no index yet (seen when two processes wrote to one server at once): a read of vectors
asks again, then counts the collection as empty; any other server error still raises."""

from __future__ import annotations

from typing import Any

import chromadb.errors
import pytest

from mulligan.memory import store

EMPTY = {"ids": [], "embeddings": [], "documents": [], "metadatas": []}


class Collection:
    """Fails its first `failures` reads with `error`, then answers."""

    def __init__(self, failures: int, error: str = "Nothing found on disk") -> None:
        self.failures, self.error, self.reads = failures, error, 0

    def get(self, **_: Any) -> dict[str, Any]:
        self.reads += 1
        if self.reads <= self.failures:
            raise chromadb.errors.InternalError(f"Error creating hnsw segment reader: {self.error}")
        return {**EMPTY, "ids": ["a-1"]}

    def query(self, **_: Any) -> dict[str, Any]:
        return {"ids": [self.get()["ids"]], "metadatas": [[]], "distances": [[]]}


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store.time, "sleep", lambda _: None)


def test_a_read_that_finds_no_index_yet_is_asked_again() -> None:
    collection = Collection(failures=2)
    assert store._with_vectors(collection, ["documents", "metadatas"])["ids"] == ["a-1"]
    assert store._query(collection, [[0.0]], 1, ["metadatas"])["ids"] == [["a-1"]]
    assert collection.reads == 4


def test_a_collection_never_indexed_reads_as_empty() -> None:
    collection = Collection(failures=100)
    assert store._with_vectors(collection, ["documents", "metadatas"]) == EMPTY
    assert store._query(collection, [[0.0]], 1, ["metadatas"])["ids"] == [[]]
    assert collection.reads == 12


def test_another_server_error_raises() -> None:
    collection = Collection(failures=1, error="disk full")
    with pytest.raises(chromadb.errors.InternalError, match="disk full"):
        store._with_vectors(collection, ["documents", "metadatas"])
    assert collection.reads == 1
