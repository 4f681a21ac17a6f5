"""An embedding spec (`minilm`, `minilm:DIR`, `hash[:N]`, `openai[:M]`): well formed, and
its model loadable before a run that uses the lesson store."""

from __future__ import annotations

from pathlib import Path

from mulligan.errors import UserError


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


def embedding_available(spec: str) -> None:
    """Before a run that will use the lesson store: its embedding model can be loaded."""
    import importlib.util

    kind, _, argument = spec.partition(":")
    if kind != "minilm":
        return
    from mulligan.memory.embeddings import find_minilm

    find_minilm(argument or None)
    for package in ("onnxruntime", "tokenizers"):
        if importlib.util.find_spec(package) is None:
            raise UserError(
                f"the minilm embedding needs the {package} package: pip install "
                "'mulligan[minilm]', or pick --embedding hash or --embedding openai"
            )
