"""Embedding functions: the hash embedding is deterministic, normalised and lexical; missing
MiniLM files and unknown specs are one-line errors naming the fixes; MiniLM embeds by meaning."""

from __future__ import annotations

from pathlib import Path

import pytest

from mulligan.errors import UserError
from mulligan.memory.embeddings import HashEmbedding, MiniLMEmbedding, make_embedder


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_hash_embedding_is_deterministic_normalised_and_lexical() -> None:
    embed = HashEmbedding()
    a, b, c = embed.embed(
        ["check the empty list", "check the empty list first", "stock prices fell"]
    )
    assert embed.embed(["check the empty list"])[0] == a
    assert cosine(a, a) == pytest.approx(1.0)
    assert cosine(a, b) > 0.6 > cosine(a, c)


def test_missing_minilm_files_give_one_line_with_the_fixes(tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        MiniLMEmbedding(str(tmp_path))
    message = str(caught.value)
    assert "\n" not in message
    for fix in (
        "mulligan[minilm]",
        "minilm:DIR",
        "MULLIGAN_MINILM_DIR",
        "--embedding hash",
        str(tmp_path),
    ):
        assert fix in message


def test_unknown_embedding_is_a_user_error() -> None:
    with pytest.raises(UserError, match="unknown embedding"):
        make_embedder("word2vec")
    with pytest.raises(UserError, match="needs an endpoint"):
        make_embedder("openai")


def test_minilm_embeds_by_meaning_and_batches_by_the_longest() -> None:
    embed = MiniLMEmbedding()  # from the `minilm` extra, installed by .ci/run; no download
    cat, kitten, market = embed.embed(
        [
            "A cat sits on the mat.",
            "A kitten is sitting on a rug.",
            "The stock market fell sharply.",
        ]
    )
    assert len(cat) == 384 and cosine(cat, cat) == pytest.approx(1.0, abs=1e-5)
    assert cosine(cat, kitten) > 0.5 > 0.2 > cosine(cat, market)
    alone = embed.embed(["short text"])[0]
    beside_a_long_one = embed.embed(["short text", "a much longer text " * 30])[0]
    assert max(abs(x - y) for x, y in zip(alone, beside_a_long_one, strict=True)) < 1e-5
