"""The local server's parallel slots: as many as the run's concurrency unless `[local]` says
otherwise, each holding compression's threshold and a capped reply; and llama.cpp's real
server (SmolLM2) answering two requests at once on two slots, each counted."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from mulligan.errors import UserError
from mulligan.llm.base import ChatResponse
from mulligan.llm.local_model import ModelFile
from mulligan.llm.local_server import LocalServer, ServerSettings
from mulligan.llm.openai_client import OpenAIChatModel
from mulligan.llm.pricing import Price
from mulligan.runs.build import local_server_settings
from mulligan.settings.loading import load_config
from tests.llm.smollm2 import smollm2  # noqa: F401 (the fixture)

pytestmark = pytest.mark.timeout(600)  # a real server on a busy 2-core machine


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in ("MULLIGAN_CONFIG", "MULLIGAN_LOCAL_SLOTS", "MULLIGAN_LOCAL_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_slot_per_concurrent_task_unless_local_says_otherwise(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shape = local_server_settings(load_config({"concurrency": 3}))
    assert (shape.slots, shape.threads) == (3, None)
    (project / "mulligan.toml").write_text("[local]\nslots = 2\nthreads = 1\n")
    config = load_config({"concurrency": 3})
    assert (local_server_settings(config).slots, local_server_settings(config).threads) == (2, 1)
    assert config.source_of("local.slots") == f"{project / 'mulligan.toml'}:2"
    monkeypatch.setenv("MULLIGAN_LOCAL_THREADS", "2")
    config = load_config({})
    assert local_server_settings(config).threads == 2
    assert config.source_of("local.threads") == "$MULLIGAN_LOCAL_THREADS"
    monkeypatch.setenv("MULLIGAN_LOCAL_THREADS", "0")
    with pytest.raises(UserError, match="MULLIGAN_LOCAL_THREADS"):
        load_config({})


def test_each_slot_holds_the_compression_threshold_and_a_capped_reply(project: Path) -> None:
    for threshold, reply in [(4000, 2048), (12000, 4096), (500, 100)]:
        flags = {"compress_at": threshold, "max_reply_tokens": reply, "concurrency": 2}
        shape = local_server_settings(load_config(flags))
        assert shape.context_per_slot >= threshold + reply
        assert shape.context_per_slot % 1024 == 0
    assert (
        local_server_settings(load_config({})).context_per_slot == 8192
    )  # the defaults: 4000 + 2048


def slots_of(server: LocalServer) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{server.address}/slots", timeout=60) as reply:
        found = json.loads(reply.read())
    assert isinstance(found, list)
    return found


def test_the_servers_whole_context_is_each_slots_share_and_what_it_is_started_with() -> None:
    """`context` (benchmarks/local_model.py prints it) is the slots' shares in all, the
    `--ctx-size` llama.cpp is given, which splits it equally among the slots."""
    model = ModelFile(Path("model.gguf"), "model", size=1, sha256="0")
    server = LocalServer(model, ServerSettings(slots=3, context_per_slot=2048))
    flags = server.flags()
    assert server.context == 3 * 2048
    assert flags[flags.index("--ctx-size") + 1] == str(server.context)
    assert flags[flags.index("--parallel") + 1] == "3"


def test_two_requests_at_once_on_two_slots_both_counted(smollm2: LocalServer) -> None:  # noqa: F811
    assert [slot["n_ctx"] for slot in slots_of(smollm2)] == [2048, 2048]  # n_ctx split in two
    model = OpenAIChatModel(smollm2.model.alias, base_url=smollm2.base_url, price=Price(0, 0))
    replies: dict[int, ChatResponse] = {}

    def ask(number: int) -> None:
        prompt = f"Count from {number} to 400, one number per line."
        replies[number] = model.chat([{"role": "user", "content": prompt}], max_tokens=160)

    askers = [threading.Thread(target=ask, args=(n,)) for n in (1, 2)]
    for asker in askers:
        asker.start()
    busy = []
    while any(asker.is_alive() for asker in askers):
        busy.append(sum(bool(slot["is_processing"]) for slot in slots_of(smollm2)))
        time.sleep(0.05)
    for asker in askers:
        asker.join()
    assert max(busy) == 2, f"the two requests never ran at once: {busy}"
    assert sorted(replies) == [1, 2]
    for reply in replies.values():
        assert reply.text and reply.usage.prompt_tokens > 0
        assert 0 < reply.usage.completion_tokens <= 160
