"""`mulligan memory mcp`: the memory served over MCP on stdio, driven through the SDK's own
client against the real server process, its reflector on the fake OpenAI server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import mcp
import pytest
from mcp.client.stdio import stdio_client

from mulligan.cli import main
from mulligan.memory import HashEmbedding, Memory
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.memory.helpers import plant

TASK = "A path is 3 km long. How long is it in metres?"
LESSON = "Convert km to metres by multiplying by 1000."
DIAGNOSIS = "The answer was given in km; the question asks for metres."


def reflector(body: dict[str, Any]) -> FakeReply:
    assert "You review a failed attempt" in json.dumps(body["messages"])
    reflection = {"diagnosis": DIAGNOSIS, "lesson": LESSON, "tags": [], "replaces": []}
    return FakeReply(content=json.dumps(reflection))


async def session(directory: Path, base_url: str, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    """Start the server, list its tools, make the calls in order; (tools, results)."""
    argv = ["-m", "mulligan.cli", "memory", "mcp", "--memory", str(directory)]
    argv += ["--embedding", "hash", "--min-similarity", "0", "--family", "units"]
    argv += ["--base-url", base_url, "--model", "fake-reflector"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    params = mcp.StdioServerParameters(command=sys.executable, args=argv, env=env)
    async with stdio_client(params) as (reading, writing):  # noqa: SIM117
        async with mcp.ClientSession(reading, writing) as client:
            await client.initialize()
            tools = await client.list_tools()
            results = [await client.call_tool(name, arguments) for name, arguments in calls]
    return {t.name: t for t in tools.tools}, results


def test_recall_and_report_through_the_sdks_client(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    plant(memory, "proven", "Read how long the path is in the units asked.", status="validated")
    plant(memory, "unproven", "Metres are km times 1000.")
    report = {"task": TASK, "answer": "3", "passed": False, "feedback": "expected 3000"}
    calls = [
        ("recall", {"task": TASK}),
        ("report", report | {"shown": ["proven"]}),
        ("report", report | {"shown": ["proven", "nosuch"]}),  # refused: nothing stored
        ("report", report | {"passed": "perhaps"}),  # refused too
        ("recall", {"task": TASK}),
    ]
    with FakeOpenAIServer(policy=reflector) as server:
        tools, results = asyncio.run(session(tmp_path / "mem", server.base_url, calls))
        asked = len(server.requests)
    assert set(tools) == {"recall", "report"}
    assert tools["report"].input_schema["required"] == ["task", "answer", "passed"]
    first, failed, unknown, malformed, second = results
    assert not first.is_error
    assert [(x["id"], x["status"]) for x in first.structured_content["lessons"]] == [
        ("proven", "validated")
    ]  # the candidate is not shown
    written = {x["kind"]: x for x in failed.structured_content["written"]}
    assert written["failure"]["text"] == LESSON and written["failure"]["status"] == "candidate"
    assert unknown.is_error and "no lesson 'nosuch'" in unknown.content[0].text
    assert malformed.is_error and "passed" in malformed.content[0].text
    assert [x["text"] for x in second.structured_content["diagnoses"]] == [DIAGNOSIS]
    assert second.structured_content["attempt"] == 2  # the refused reports made no attempt
    assert asked == 1  # the reflector, once: after the one failure recorded

    after = Memory(tmp_path / "mem", HashEmbedding())
    (episode,) = after.log.episodes()
    assert (episode["trials"], episode["run_id"].startswith("mcp-")) == (1, True)
    v = after.lessons(["proven"])[0].validity
    assert (v.retrieved, v.hurt) == (2, 1)  # shown at both recalls, failed once
    stored = after.lessons([written["failure"]["id"]])[0]
    assert stored.source.episode_id == episode["id"] and stored.source.model == "fake-reflector"
    assert after.log.run(episode["run_id"])["status"] == "finished"  # type: ignore[index]


def test_the_command_refuses_a_memory_that_is_a_file_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("not a memory")
    code = main(["memory", "mcp", "--memory", str(tmp_path / "file"), "--embedding", "hash"])
    assert code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_command_without_an_endpoint_says_how_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["memory", "mcp", "--memory", str(tmp_path / "mem"), "--embedding", "hash"])
    assert code == 2
    assert "OPENAI_BASE_URL" in capsys.readouterr().err
    assert not (tmp_path / "mem").exists()  # nothing made for a command that cannot run
