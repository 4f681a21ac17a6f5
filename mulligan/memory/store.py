"""The lesson store on chromadb: the only module that imports it."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import chromadb  # noqa: E402
import chromadb.errors  # noqa: E402
import numpy as np  # noqa: E402
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings  # noqa: E402

from mulligan.errors import UserError  # noqa: E402
from mulligan.inputs.memory_files import is_server  # noqa: E402
from mulligan.memory.embeddings import Embedder, spec_for  # noqa: E402
from mulligan.memory.store_lock import GenerationLock  # noqa: E402
from mulligan.memory.store_reading import FAMILY_PREFIX, metadata_of, refuse_another  # noqa: E402
from mulligan.memory.validity import ACTIVE, GENERAL, is_usable  # noqa: E402
from mulligan.schema import Lesson, LessonStatus  # noqa: E402

PREFIX = FAMILY_PREFIX
BATCH = 4000
"""Records per write, below chromadb's maximum batch size."""
EVERY_LESSON = "every-lesson"
"""Beside one collection per family, one of every lesson: a search without a family is one
query there instead of one per family and a fetch of each record found (p95 at 100k lessons,
before and after: results/2026-12-01-lesson-search.md)."""
DUPLICATE_SIMILARITY = 0.92
"""A lesson at least this similar to a stored one of its kind and scope says the same."""


class _ChromaEmbedding(EmbeddingFunction[Documents]):
    """Adapts an Embedder to chromadb's embedding-function interface."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def __call__(self, input: Documents) -> Embeddings:
        return [np.asarray(v, dtype=np.float32) for v in self.embedder.embed(list(input))]

    @staticmethod
    def name() -> str:
        return "mulligan"

    def get_config(self) -> dict[str, Any]:
        return {"embedder": self.embedder.name}

    def is_legacy(self) -> bool:
        return False

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> _ChromaEmbedding:
        return _ChromaEmbedding(_NotGiven(str(config.get("embedder", "?"))))


class _NotGiven:
    """What chroma rebuilds from a stored config; mulligan always passes the real one."""

    def __init__(self, name: str) -> None:
        self.name = name

    def embed(self, texts: list[str]) -> list[list[float]]:
        given = f"--embedding {spec_for(self.name)}" if self.name else "--embedding"
        raise UserError(f"open the lesson store through mulligan with {given}")


def _indexed(read: Callable[[], Any], empty: Any) -> Any:
    """A read of vectors. A chroma server says "Nothing found on disk" of a collection another
    client just made and has not indexed yet: asked a moment later (its writer is mid-write)
    it has an index, and if still not, it is empty."""
    for pause in (0.05, 0.1, 0.2, 0.4, 0.8, 0.0):
        try:
            return read()
        except chromadb.errors.InternalError as exc:
            if "Nothing found on disk" not in str(exc):
                raise
        time.sleep(pause)
    return empty


def _query(collection: Any, vector: list[Any], k: int, include: list[str]) -> Any:
    query = lambda: collection.query(query_embeddings=vector, n_results=k, include=include)  # noqa: E731
    return _indexed(query, {"ids": [[]], "metadatas": [[]], "distances": [[]]})


def _with_vectors(collection: Any, include: list[str], **where: Any) -> Any:
    get = lambda: collection.get(include=["embeddings", *include], **where)  # noqa: E731
    return _indexed(get, {"ids": [], "embeddings": [], **{part: [] for part in include}})


class LessonStore:
    """Lessons in chroma, one collection per family (the scope retrieval works in).

    Filtering by metadata inside chroma costs ~1 ms per 1,000 lessons per query, so
    the family filter is the choice of collection and the status filter is applied
    to the nearest candidates here.
    """

    def __init__(self, location: str, embedder: Embedder | None):
        """`embedder` None opens the store for reading and updating metadata only (list, show,
        export, stats, retract): any call that would embed says which embedding to pass."""
        self.location = location
        self.embedder: Embedder = embedder or _NotGiven("")
        self._client: Any = None
        self._pid = os.getpid()
        self._lock = GenerationLock(
            None if is_server(location) else Path(location) / "lessons.lock"
        )
        if self._lock.path:
            Path(location).mkdir(parents=True, exist_ok=True)
        self.built_with: str | None = None
        """The embedding the stored lessons were embedded with (None: an empty store)."""
        with self._locked():
            for collection in self._all_collections():
                self.built_with = self.built_with or (collection.metadata or {}).get("embedder")
        if embedder is None:
            self.embedder = _NotGiven(self.built_with or "")
        else:
            self.use(embedder)

    def use(self, embedder: Embedder) -> None:
        """Embed with `embedder` from now on; refused if the store was built with another."""
        refuse_another(self.location, self.built_with, embedder.name)
        self.embedder = embedder
        self._forget()

    def _forget(self) -> None:
        """The collections are fetched again (with this embedder, from this client)."""
        self._collections: dict[str, Any] = {}
        self._index: Any = None
        self._listed = False

    def _open(self) -> None:
        self._forget()
        if self._lock.path is None:
            url = urlparse(self.location)
            host, port, ssl = url.hostname or "127.0.0.1", url.port or 8000, url.scheme == "https"
            try:
                self._client = chromadb.HttpClient(host=host, port=port, ssl=ssl)
            except ValueError as exc:  # chroma's word for nothing answering there
                raise UserError(f"lesson store {self.location}: no chroma server answers there "
                                f"({exc}); start it, or name a directory") from exc  # fmt: skip
        else:
            self._client = chromadb.PersistentClient(path=self._chroma_path)
        self._system = self._shared_system()

    @property
    def _chroma_path(self) -> str:
        """The embedded store's chromadb directory, as chromadb names its shared system."""
        return str(Path(self.location) / "chroma")

    def _shared_system(self) -> Any:
        """The chromadb system this process's stores on the path share now (None: a server)."""
        from chromadb.api.shared_system_client import SharedSystemClient

        if self._lock.path is None:
            return None
        return SharedSystemClient._identifier_to_system.get(self._chroma_path)

    def _reopen(self) -> None:
        """Drop chromadb's cached in-memory index for this path and load it from disk again."""
        from chromadb.api.shared_system_client import SharedSystemClient

        system = SharedSystemClient._identifier_to_system.pop(self._chroma_path, None)
        SharedSystemClient._identifier_to_refcount.pop(self._chroma_path, None)
        if system is not None:
            system.stop()
        self._open()

    @staticmethod
    def collection_name(family: str) -> str:
        """A valid chroma name per family: readable part plus a hash against collisions."""
        readable = re.sub(r"\.{2,}", ".", re.sub(r"[^a-zA-Z0-9._-]", "_", family))[:40]  # no ..
        digest = hashlib.sha256(family.encode()).hexdigest()[:10]
        return f"{PREFIX}{readable}-{digest}"

    def _made(self, name: str, **metadata: str) -> Any:
        """The collection of that name, made if it is not there, embedding with ours."""
        return self._client.get_or_create_collection(
            name,
            embedding_function=_ChromaEmbedding(self.embedder),  # type: ignore[arg-type]
            metadata={"hnsw:space": "cosine", "embedder": self.embedder.name, **metadata},
        )

    def _collection(self, family: str) -> Any:
        if family not in self._collections:
            self._collections[family] = self._made(self.collection_name(family), family=family)
        return self._collections[family]

    def _every_lesson(self) -> Any:
        """The index of every family, filled from the families' collections when a store
        written before it existed (or by another version) holds lessons it lacks."""
        if self._index is None:
            self._index = self._made(EVERY_LESSON)
            families = self._all_collections()
            if int(self._index.count()) < sum(int(c.count()) for c in families):
                for collection in families:
                    found = _with_vectors(collection, ["documents", "metadatas"])
                    for start in range(0, len(found["ids"]), BATCH):
                        part = slice(start, start + BATCH)
                        self._index.upsert(
                            ids=found["ids"][part],
                            embeddings=found["embeddings"][part],
                            documents=(found["documents"] or [])[part],
                            metadatas=(found["metadatas"] or [])[part],
                        )
        return self._index

    def _all_collections(self) -> list[Any]:
        """Every family's collection (listed once per (re)open; our own new ones join)."""
        if self._listed:
            return list(self._collections.values())
        families = []
        for found in self._client.list_collections():
            name = found if isinstance(found, str) else found.name
            if name.startswith(PREFIX):
                collection = self._client.get_collection(
                    name,
                    embedding_function=_ChromaEmbedding(self.embedder),  # type: ignore[arg-type]
                )
                families.append(str((collection.metadata or {}).get("family", "")))
        self._listed = True
        return [self._collection(family) for family in families]

    @contextlib.contextmanager
    def _locked(self, write: bool = False) -> Iterator[None]:
        """One process at a time in an embedded store, its index reloaded from disk when
        another process wrote since (memory/store_lock.py)."""
        if self._lock.path and os.getpid() != self._pid:  # chromadb hangs across a fork
            raise UserError(
                f"the lesson store at {self.location} was opened in another process, this one "
                "forked from it; open the Agent or Memory in each process (or use 'spawn')"
            )
        with self._lock.held(write) as overtaken:
            if self._client is None:
                self._open()
            elif overtaken:
                self._reopen()
            elif self._system is not self._shared_system():
                self._open()  # another store in this process reloaded it: join the new one
            yield

    def count(self) -> int:
        with self._locked():
            return sum(int(c.count()) for c in self._all_collections())

    def get(self, ids: list[str]) -> list[Lesson]:
        by_id = {lesson.id: lesson for lesson in self._records(ids=ids)} if ids else {}
        return [by_id[i] for i in ids if i in by_id]

    def all(self) -> list[Lesson]:
        return sorted(self._records(), key=lambda lesson: (lesson.source.created_at, lesson.id))

    def _records(self, **where: Any) -> list[Lesson]:
        """The stored lessons of every family (`where`: of these `ids`)."""
        with self._locked():
            return [
                Lesson.model_validate_json(str(m["record"]))
                for collection in self._all_collections()
                for m in collection.get(include=["metadatas"], **where)["metadatas"] or []
            ]

    def vectors(self, ids: list[str]) -> dict[str, list[float]]:
        """The stored embedding of each of these lessons (for comparing lessons with each other)."""
        found: dict[str, list[float]] = {}
        with self._locked():
            for collection in self._all_collections() if ids else []:
                got = _with_vectors(collection, [], ids=ids)
                vectors = got["embeddings"] if got["embeddings"] is not None else []
                found.update(
                    (i, [float(x) for x in v]) for i, v in zip(got["ids"], vectors, strict=False)
                )
        return found

    def similar(self, text: str, k: int, family: str | None = None) -> list[tuple[Lesson, float]]:
        """Nearest lessons by cosine similarity (1 - distance), most similar first."""
        with self._locked():
            return self._similar_unlocked(text, k, family)

    def _similar_unlocked(
        self, text: str, k: int, family: str | None
    ) -> list[tuple[Lesson, float]]:
        one = family is not None
        collections = [self._collection(family)] if one else self._all_collections()  # type: ignore[arg-type]
        if not collections:
            return []
        vector = [np.asarray(self.embedder.embed([text])[0], dtype=np.float32)]
        searched = collections[0] if len(collections) == 1 else self._every_lesson()
        found = _query(searched, vector, k, ["metadatas", "distances"])
        return [
            (Lesson.model_validate_json(str(m["record"])), 1.0 - float(d))
            for m, d in zip(
                (found["metadatas"] or [[]])[0], (found["distances"] or [[]])[0], strict=False
            )
        ]

    def search(
        self,
        text: str,
        k: int,
        family: str | None = None,
        exclude: set[str] | None = None,
        min_similarity: float = 0.0,
        *,
        kinds: tuple[str, ...] = GENERAL,
        statuses: tuple[LessonStatus, ...] = ACTIVE,
    ) -> list[tuple[Lesson, float]]:
        """Usable lessons of `kinds` (general ones; cases) in `statuses`, at least
        `min_similarity` similar to `text`, ranked by similarity weighted by confidence."""
        exclude, now, wanted = exclude or set(), time.time(), k * 4 + len(exclude or ())
        while True:
            pool = self.similar(text, wanted, family)
            ranked = [
                (lesson, similarity * lesson.validity.confidence)
                for lesson, similarity in pool
                if is_usable(lesson, now, statuses) and lesson.id not in exclude
                if similarity >= min_similarity and lesson.kind in kinds
            ]
            if len(ranked) >= k or len(pool) < wanted or pool[-1][1] < min_similarity:
                break  # (the pool runs most similar first: past the floor, no more to find)
            wanted *= 4  # many unusable neighbours: look further
        ranked.sort(key=lambda pair: pair[1], reverse=True)
        return ranked[:k]

    def put(self, lessons: list[Lesson]) -> None:
        """Insert or replace whole records (embeds every text: for new lessons)."""
        if not lessons:
            return
        with self._locked(write=True):
            self._upsert_unlocked(lessons)

    def add_or_strengthen(self, lesson: Lesson) -> tuple[Lesson, bool]:
        """Store a new lesson, or strengthen a stored one that says the same in the same scope.

        Returns the lesson kept and whether it was new (the caller counts the twin's
        reinforcement where counters live, then `refresh`es it).
        """
        with self._locked(write=True):
            for twin, similarity in self._similar_unlocked(lesson.text, 3, lesson.scope.family):
                same_kind = twin.kind == lesson.kind and twin.validity.status in ACTIVE
                same_kind &= lesson.kind != "case" or twin.scope.task_id == lesson.scope.task_id
                if same_kind and similarity >= DUPLICATE_SIMILARITY:
                    return twin, False
            self._upsert_unlocked([lesson])
            return lesson, True

    def refresh(self, ids: list[str], current: Callable[[list[str]], list[Lesson]]) -> None:
        """Rewrite stored lessons' metadata (counters, status) from `current`, the source of
        truth, without re-embedding. Read inside the lock, so the last writer writes the
        latest state whatever order processes committed in."""
        if not ids:
            return
        with self._locked(write=True):
            for family, group in _by_family(current(ids)).items():
                for collection in (self._collection(family), self._every_lesson()):
                    collection.update(
                        ids=[lesson.id for lesson in group],
                        metadatas=[metadata_of(lesson) for lesson in group],  # type: ignore[misc]
                    )

    def _upsert_unlocked(self, lessons: list[Lesson]) -> None:
        """Into the family's collection and the index of every family, embedded once."""
        index = self._every_lesson()
        for family, group in _by_family(lessons).items():
            collection = self._collection(family)
            for start in range(0, len(group), BATCH):
                chunk = group[start : start + BATCH]
                texts = [lesson.text for lesson in chunk]
                record = {
                    "ids": [lesson.id for lesson in chunk],
                    "documents": texts,
                    "embeddings": _ChromaEmbedding(self.embedder)(texts),
                    "metadatas": [metadata_of(lesson) for lesson in chunk],
                }
                collection.upsert(**record)
                index.upsert(**record)


def _by_family(lessons: list[Lesson]) -> dict[str, list[Lesson]]:
    by_family: dict[str, list[Lesson]] = {}
    for lesson in lessons:
        by_family.setdefault(lesson.scope.family, []).append(lesson)
    return by_family
