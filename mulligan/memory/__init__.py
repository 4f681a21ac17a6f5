"""Lesson store (chromadb), episode log (sqlite-utils), embeddings, validity."""

from mulligan.memory.embeddings import HashEmbedding, make_embedder
from mulligan.memory.memory import Memory
from mulligan.memory.validity import ValiditySection

__all__ = ["HashEmbedding", "Memory", "ValiditySection", "make_embedder"]
