"""`mulligan memory mcp`: the memory served over MCP on stdio, driven through the SDK's own
client against the real server process, its reflector on the fake OpenAI server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp
import pytest
from mcp.client.stdio import stdio_client

from mulligan.cli import main
from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.reading import MemoryReader
from mulligan.report.stats import collect
from mulligan.sandbox.processes import this_process
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.helpers.terminal import ctrl_c_reaches_it
from tests.memory.helpers import plant

TASK = "A path is 3 km long. How long is it in metres?"
LESSON = "When a path is given in km and the question asks for metres, multiply the km by 1000."
DIAGNOSIS = "The answer was given in km; the question asks for metres."


def reflector(body: dict[str, Any]) -> FakeReply:
    """A diagnosis after every failure; the general lesson only from the first task's."""
    text = json.dumps(body["messages"])
    assert "You review a failed attempt" in text
    lesson = LESSON if "A path is 1 km" in text else ""
    return FakeReply(content=json.dumps({"diagnosis": DIAGNOSIS, "lesson": lesson}))


def path_task(km: int) -> str:
    return f"A path is {km} km long. How long is it in metres?"


Client = Any
Script = Callable[[Client], Awaitable[list[Any]]]


async def session(directory: Path, base_url: str, script: Script) -> tuple[dict[str, Any], Any]:
    """Start the server, list its tools, run the client's script; (tools, what it returned)."""
    argv = ["-m", "mulligan.cli", "memory", "mcp", "--memory", str(directory)]
    argv += ["--embedding", "hash", "--min-similarity", "0", "--family", "units"]
    argv += ["--base-url", base_url, "--model", "fake-reflector"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    params = mcp.StdioServerParameters(command=sys.executable, args=argv, env=env)
    async with stdio_client(params) as (reading, writing):  # noqa: SIM117
        async with mcp.ClientSession(reading, writing) as client:
            await client.initialize()
            tools = await client.list_tools()
            found = await script(client)
    return {t.name: t for t in tools.tools}, found


async def first_day(client: Client) -> list[Any]:
    """Task 1 fails and teaches the lesson; two reports are refused; then tasks 2 to 5,
    whose agent passes exactly when shown the lesson, each at most two attempts."""
    calls = [await client.call_tool("recall", {"task": path_task(1)})]
    report = {"task": path_task(1), "answer": "1", "passed": False, "feedback": "in metres"}
    calls.append(await client.call_tool("report", report | {"shown": ["proven"]}))
    calls.append(await client.call_tool("report", report | {"shown": ["proven", "nosuch"]}))
    calls.append(await client.call_tool("report", report | {"passed": "true"}))  # text
    calls.append(await client.call_tool("report", report | {"show": ["proven"]}))  # misspelt
    calls.append(await client.call_tool("recall", {"task": path_task(1)}))
    for km in range(2, 6):
        for attempt in (1, 2):
            found = (await client.call_tool("recall", {"task": path_task(km)})).structured_content
            assert found["attempt"] == attempt
            shown = [x["id"] for x in found["lessons"] + found["diagnoses"]]
            tried = any(x["text"] == LESSON for x in found["lessons"])
            answer = {"answer": str(km * 1000 if tried else km), "passed": tried}
            await client.call_tool("report", {"task": path_task(km), "shown": shown} | answer)
            if tried:
                break
    return calls


async def next_day(client: Client) -> list[Any]:
    return [await client.call_tool("recall", {"task": path_task(9)})]


def test_recall_and_report_through_the_sdks_client_verify_a_lesson_across_sessions(
    tmp_path: Path,
) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    plant(memory, "proven", "Read how long the path is in the units asked.", status="validated")
    with FakeOpenAIServer(policy=reflector) as server:
        tools, calls = asyncio.run(session(tmp_path / "mem", server.base_url, first_day))
        _, (later,) = asyncio.run(session(tmp_path / "mem", server.base_url, next_day))
        assert server.violations == []
    assert set(tools) == {"recall", "report"}
    assert tools["report"].input_schema["required"] == ["task", "answer", "passed"]
    first, failed, unknown, malformed, misspelt, second = calls
    assert [(x["id"], x["status"]) for x in first.structured_content["lessons"]] == [
        ("proven", "validated")
    ]
    written = {x["kind"]: x for x in failed.structured_content["written"]}
    assert written["failure"]["text"] == LESSON and written["failure"]["status"] == "candidate"
    assert unknown.is_error and "no lesson 'nosuch'" in unknown.content[0].text
    assert malformed.is_error and "passed" in malformed.content[0].text
    assert misspelt.is_error and "report: no argument 'show'" in misspelt.content[0].text
    assert [x["text"] for x in second.structured_content["diagnoses"]] == [DIAGNOSIS]
    assert second.structured_content["attempt"] == 2  # the refused reports made no attempt

    after = Memory(tmp_path / "mem", HashEmbedding())
    lesson = after.lessons([written["failure"]["id"]])[0]
    e = lesson.validity.evidence
    assert (lesson.validity.status, e.pairs, e.helped, e.hurt) == ("validated", 2, 2, 0)
    shown_next_day = later.structured_content["lessons"]
    assert (lesson.id, "validated") in [(x["id"], x["status"]) for x in shown_next_day]
    assert later.structured_content["attempt"] == 1  # a new session's first attempt
    episode = after.log.episode(lesson.source.episode_id)
    assert episode is not None and episode.task_id.startswith("a-path-is-1-km")
    assert [a.answer for a in episode.attempts] == ["1"]  # only the report that was recorded
    runs = {row["id"]: row["status"] for row in after.log.runs()}
    assert len(runs) == 2 and set(runs.values()) == {"finished"}


def test_ctrl_c_stops_the_server_with_its_run_marked_interrupted_and_no_resume_to_offer(
    tmp_path: Path,
) -> None:
    """The command has no --resume: a new session is a new run of the service."""
    with FakeOpenAIServer(policy=reflector) as server:
        argv = [sys.executable, "-m", "mulligan.cli", "memory", "mcp", "--memory"]
        argv += [str(tmp_path / "mem"), "--embedding", "hash", "--base-url", server.base_url]
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env, preexec_fn=ctrl_c_reaches_it,
        )  # fmt: skip
        assert process.stderr is not None
        assert "serving the memory" in process.stderr.readline()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    # 130, or ended by the SIGINT itself where the interpreter re-raises it at exit (a
    # loaded machine, the event loop's own handler): a shell reads both as 130
    assert process.returncode in (130, -signal.SIGINT), err
    assert "--resume" not in err and "interrupted" in err
    runs = Memory(tmp_path / "mem", HashEmbedding()).log.runs()
    assert [row["status"] for row in runs] == ["interrupted"]


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


class RawServer:
    """The server process spoken to line by line (JSON-RPC over its stdio), so that a test
    can kill it in the middle of a call."""

    def __init__(self, directory: Path, base_url: str) -> None:
        argv = [sys.executable, "-m", "mulligan.cli", "memory", "mcp", "--memory", str(directory)]
        argv += ["--embedding", "hash", "--min-similarity", "0", "--base-url", base_url]
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env,
        )  # fmt: skip
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
        self.ask("initialize", hello | {"clientInfo": {"name": "test", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        assert self.process.stdout is not None
        return dict(json.loads(self.process.stdout.readline())["result"])

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.ask("tools/call", {"name": tool, "arguments": arguments})["structuredContent"]

    def close(self) -> None:
        self.process.kill()
        self.process.communicate(timeout=60)


def test_a_server_killed_while_its_reflector_answers_a_report_has_counted_nothing_of_it(
    tmp_path: Path,
) -> None:
    """kill -9 in the middle of a report: the client, never answered, reports again to the
    restarted server, and the outcome is counted once, with the lesson the reflector wrote."""
    memory = Memory(tmp_path / "mem", HashEmbedding())
    plant(memory, "proven", "Read how long the path is in the units asked.", status="validated")
    asked = threading.Event()

    def slow_reflector(body: dict[str, Any]) -> FakeReply:
        if not asked.is_set():
            asked.set()
            return FakeReply(content="{}", delay=60)  # killed long before it answers
        return reflector(body)

    report = {"task": path_task(1), "answer": "1", "passed": False, "shown": ["proven"]}
    with FakeOpenAIServer(policy=slow_reflector) as server:
        first = RawServer(tmp_path / "mem", server.base_url)
        first.call("recall", {"task": path_task(1)})
        first.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "report", "arguments": report}})  # fmt: skip
        assert asked.wait(60)
        first.close()
        again = RawServer(tmp_path / "mem", server.base_url)
        done = again.call("report", report)
        again.close()
    after = Memory(tmp_path / "mem", HashEmbedding())
    assert after.lessons(["proven"])[0].validity.hurt == 1
    attempts = [row["trials"] for row in after.log.episodes()]
    assert sorted(attempts) == [0, 1]  # the killed server's episode holds no attempt
    assert [x["text"] for x in done["written"] if x["kind"] == "failure"] == [LESSON]
    assert done["attempt"] == 1 and done["reflection"] == "done"


def test_a_server_killed_leaves_its_run_read_as_interrupted_not_running(tmp_path: Path) -> None:
    """kill -9 leaves the run the server started marked running in the log; once its process
    is gone (a zombie not yet reaped, then reaped), every reader of the log reads the run as
    interrupted, while another server's, still serving, reads running."""
    with FakeOpenAIServer(policy=reflector) as server:
        killed = RawServer(tmp_path / "mem", server.base_url)
        killed.call("recall", {"task": path_task(1)})
        serving = RawServer(tmp_path / "mem", server.base_url)
        serving.call("recall", {"task": path_task(2)})
        killed.process.send_signal(signal.SIGKILL)
        stat = Path(f"/proc/{killed.process.pid}/stat")
        while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":  # dead, not yet reaped
            time.sleep(0.01)
        reader = MemoryReader(tmp_path / "mem")
        first, second = sorted(reader.runs(), key=lambda run: run.started_at)
        assert (first.status, second.status) == ("interrupted", "running")
        killed.close()  # reaped
        log = Memory(tmp_path / "mem", HashEmbedding()).log
        assert log.run(first.id)["status"] == "interrupted"  # type: ignore[index]
        assert collect(log, first.id).status == "interrupted"
        assert [run["status"] for run in log.runs()] == ["interrupted", "running"]
        serving.close()


def test_a_run_reads_running_only_while_the_process_it_names_is_the_one_that_started_it(
    tmp_path: Path,
) -> None:
    """Its pid taken by a process started at another time (the pid reused) reads interrupted;
    a process on another host, which cannot be looked at from here, reads running."""
    log = Memory(tmp_path / "mem", HashEmbedding()).log
    me = this_process()
    owners = {"me": me, "reused": {**me, "started": -1}, "elsewhere": {**me, "host": "x.invalid"}}
    for run_id, owner in owners.items():
        log.start_run(run_id, {"command": "memory mcp"})
        log.db.table("runs").update(run_id, {"owner": json.dumps(owner)})
    statuses = {run_id: log.run(run_id)["status"] for run_id in owners}  # type: ignore[index]
    assert statuses == {"me": "running", "reused": "interrupted", "elsewhere": "running"}
