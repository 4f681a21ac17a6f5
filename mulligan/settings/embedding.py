"""An embedding spec (`minilm`, `minilm:DIR`, `hash[:N]`, `openai[:M]`): well formed, and
checked before any work (its model's presence is memory/embeddings.py's `embedding_available`)."""

from __future__ import annotations

from pathlib import Path


def embedding_problem(spec: str) -> str | None:
    """What is wrong with an embedding spec (`minilm`, `minilm:DIR`, `hash[:N]`, `openai[:M]`)."""
    kind, _, argument = spec.partition(":")
    if kind == "hash":
        if argument and not (argument.isdigit() and 8 <= int(argument) <= 65536):
            return "the size after hash: must be a whole number from 8 to 65536 (e.g. hash:512)"
        return None
    if kind == "minilm":
        if argument and not Path(argument).expanduser().is_dir():
            return f"{argument} is not a directory; give the folder holding model.onnx"
        return None
    if kind == "openai":
        return None
    return "unknown embedding; use minilm, minilm:DIR, openai, openai:MODEL or hash"
