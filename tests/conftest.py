from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mulligan.testing import ScriptedModel

LOCAL = {"127.0.0.1", "::1", "localhost"}


def private_temp_root() -> str:
    """A temporary root this user owns, for pytest's `pytest-of-<user>` directory. pytest's
    default, /tmp/pytest-of-<user>, is refused (every test errors) when another account made
    it first, or when the user name in the environment is not the account running the tests;
    a directory named for the uid, made here, or else a fresh one, cannot be."""
    root = Path(tempfile.gettempdir()) / f"mulligan-tests-{os.getuid()}"
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        if root.stat().st_uid == os.getuid() and not root.is_symlink():
            return str(root)
    except OSError:
        pass
    return tempfile.mkdtemp(prefix="mulligan-tests-")


# read by pytest when it first makes a temporary directory, after this file is loaded
if "PYTEST_DEBUG_TEMPROOT" not in os.environ:
    os.environ["PYTEST_DEBUG_TEMPROOT"] = private_temp_root()


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection that is not to this machine fails the test."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> object:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0] if isinstance(address, tuple) else address
            if host not in LOCAL:
                raise AssertionError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", guarded)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MULLIGAN_MODEL", "MULLIGAN_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    # a machine with the `local` extra would otherwise answer "no endpoint" with its own model
    monkeypatch.setenv("MULLIGAN_LOCAL", "off")


HOST_TEMP = tempfile.gettempdir()


@pytest.fixture(autouse=True)
def own_temp_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test its own TMPDIR, for itself and the processes it starts: what a process a test
    kills leaves there (marked as that process's) is never swept up, and reported, by another
    test's run. Beside the host's, not in pytest's private directory: the box's own user must
    pass through it to the scratch directory it is given."""
    root = tempfile.mkdtemp(prefix="mulligan-test-temp-", dir=HOST_TEMP)
    os.chmod(root, 0o711)
    monkeypatch.setenv("TMPDIR", root)
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    yield
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def scripted() -> Iterator[list[ScriptedModel]]:
    """Scripted models made through this fixture must use every reply by the end of the test."""
    made: list[ScriptedModel] = []
    yield made
    for model in made:
        model.assert_done()


@pytest.fixture(autouse=True)
def no_user_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The developer's own ~/.config/mulligan/config.toml never changes a test: an empty
    one stands in for it."""
    empty = tmp_path_factory.getbasetemp() / "empty-user-config.toml"
    empty.touch()
    monkeypatch.setenv("MULLIGAN_CONFIG", str(empty))


@pytest.fixture
def no_local_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with the `local` extra (llama.cpp's server and the default model, joined in
    the model cache or installed as parts) looks like one without it: `doctor` reports it
    missing instead of loading the model and timing a reply, which takes half a minute on
    two cores. The local model's own line is tested with a stand-in server
    (tests/llm/test_local_server.py)."""
    from mulligan.llm import local_model

    monkeypatch.setattr(local_model, "server_installed", lambda: False)


@pytest.fixture
def unwaited_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model clients made in this test retry as often as they would, without waiting
    between tries (tests/helpers/retry_waits.py)."""
    from mulligan.llm.openai_client import OpenAIChatModel
    from tests.helpers.retry_waits import unwaited

    monkeypatch.setattr(OpenAIChatModel, "__init__", unwaited(OpenAIChatModel.__init__))
