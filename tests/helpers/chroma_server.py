"""A chroma server on 127.0.0.1 (the `chroma` command chromadb installs), for the tests whose
processes share one lesson store, as a study across machines would."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.ports import free_port


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[str]:
    """The server's URL; it keeps its data under tmp_path/chroma and stops after the test."""
    beside = Path(sys.executable).parent / "chroma"  # the venv's, even when it is not on PATH
    chroma = str(beside) if beside.exists() else shutil.which("chroma")
    assert chroma, "chromadb installs the `chroma` command"
    port = free_port()
    server = subprocess.Popen(
        [chroma, "run", "--path", str(tmp_path / "chroma"), "--host", "127.0.0.1",
         "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "no chroma server"
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)
