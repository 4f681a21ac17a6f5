"""Tools from MCP servers: offered with the server's prefix and schema, called from attempt,
run and solve, named by task files or mulligan.toml; a server that crashes or cannot start
ends cleanly, in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mulligan.actor import ToolRegistry
from mulligan.actor.mcp_tools import MCPServers
from mulligan.cli import main
from mulligan.errors import UserError
from mulligan.schema import ToolCall
from mulligan.settings.loading import load_config
from mulligan.testing import FakeOpenAIServer, FakeReply

SERVER = Path(__file__).parents[1] / "helpers" / "mcp_server.py"
START = f"{sys.executable} {SERVER}"
CRASHING = f"{START} --crash-on-call"


def calls(*pairs: tuple[str, dict[str, Any]]) -> FakeReply:
    return FakeReply(content=None, tool_calls=[{"name": n, "arguments": a} for n, a in pairs])


def function(body: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t["function"] for t in body["tools"] if t["function"]["name"] == name)


def test_a_servers_tools_are_offered_with_its_prefix_and_schema_and_called() -> None:
    with MCPServers([START], call_timeout=20) as servers:
        tools = {t.name: t for t in servers.tools}
        registry = ToolRegistry.of(servers.tools)
        added = registry.run(ToolCall(id="1", name="notes_add", arguments='{"a": 2, "b": 3}'))
        failed = registry.run(ToolCall(id="2", name="notes_lookup_word", arguments='{"word": "x"}'))
        found = registry.run(
            ToolCall(id="3", name="notes_lookup_word", arguments='{"word": "mulligan"}')
        )
    assert set(tools) == {"notes_add", "notes_lookup_word", "notes_wait"}
    parameters = tools["notes_add"].schema()["function"]["parameters"]
    assert parameters["properties"]["a"]["type"] == "integer" and parameters["required"] == [
        "a",
        "b",
    ]
    assert (added.status, added.output) == ("ok", "5")
    assert failed.status == "error" and "lookup_word" in failed.output
    assert (found.status, found.output) == ("ok", "a second try, allowed as a courtesy")
    assert all(s.gone for s in servers.servers)  # closed at the end


def test_attempt_calls_a_tool_from_an_mcp_server(capsys: pytest.CaptureFixture[str]) -> None:
    replies = [calls(("glossary_add", {"a": 2, "b": 3})), FakeReply(content="2 + 3 = 5")]
    with FakeOpenAIServer(replies) as server:
        code = main(
            ["attempt", "What is 2 + 3?", "--tools", "", "--mcp", f"glossary={START}"]
            + ["--base-url", server.base_url]
        )
        offered = function(server.requests[0], "glossary_add")
        observed = server.requests[1]["messages"][-1]
    out = capsys.readouterr().out
    assert code == 0
    assert offered["parameters"]["properties"]["b"]["type"] == "integer"
    assert observed["role"] == "tool" and observed["content"] == "5"
    assert "<- ok: 5" in out


def test_a_server_that_crashes_mid_run_ends_the_attempt_cleanly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    replies = [
        calls(("notes_lookup_word", {"word": "mulligan"})),
        calls(("notes_add", {"a": 1, "b": 1})),
        FakeReply(content="The glossary server is gone."),
    ]
    with FakeOpenAIServer(replies) as server:
        code = main(
            ["attempt", "Define mulligan", "--tools", "", "--mcp", CRASHING]
            + ["--base-url", server.base_url]
        )
        crashed, after = (server.requests[i]["messages"][-1]["content"] for i in (1, 2))
    captured = capsys.readouterr()
    assert code == 0
    assert "MCP server 'notes' has stopped" in crashed
    assert "MCP server 'notes' has stopped" in after  # later calls: the same observation
    assert "answer: The glossary server is gone." in captured.out
    assert "Traceback" not in captured.err


def test_solve_offers_mcp_tools_to_its_attempts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "words"
    project.mkdir()
    (project / "WORD").write_text("")
    replies = [
        calls(("notes_lookup_word", {"word": "mulligan"})),
        calls(("write_file", {"path": "WORD", "content": "a second try\n"})),
        FakeReply(content="Wrote the definition."),
    ]
    with FakeOpenAIServer(replies) as server:
        code = main(
            ["solve", "Put the definition of mulligan in WORD", "--check", "grep -q second WORD"]
            + ["--dir", str(project), "--mcp", START, "--strategy", "react", "--protocol", "native"]
            + ["--base-url", server.base_url, "--memory", str(tmp_path / "mem")]
        )
        observed = server.requests[1]["messages"][-1]["content"]
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert observed == "a second try, allowed as a courtesy"
    assert "+a second try" in captured.out
    assert (project / "WORD").read_text() == ""


def test_task_files_name_their_own_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        json.dumps(
            {
                "id": "sum",
                "prompt": "What is 2 + 3? Use the tool.",
                "mcp": [START],
                "checks": [{"type": "contains", "text": "5"}],
            }
        )
    )
    replies = [calls(("notes_add", {"a": 2, "b": 3})), FakeReply(content="5")]
    with FakeOpenAIServer(replies) as server:
        code = main(
            ["run", str(tasks), "--base-url", server.base_url]
            + ["--memory", str(tmp_path / "mem"), "--embedding", "hash"]
        )
        offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert offered == {"notes_lookup_word", "notes_add", "notes_wait"}
    assert code == 0
    assert "PASS sum (trial 1)" in capsys.readouterr().out


def test_mcp_servers_come_from_the_config_file_too(tmp_path: Path) -> None:
    config = tmp_path / "mulligan.toml"
    config.write_text(f'mcp = ["{START}"]\n')
    assert load_config({}, config).run.mcp == [START]
    assert load_config({"mcp": ["other"]}, config).run.mcp == ["other"]  # the flag wins
    config.write_text('mcp = "python srv.py"\n')
    with pytest.raises(UserError, match="key .mcp.: Input should be a valid list"):
        load_config({}, config)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "no-such-program-for-mulligan",
            "--mcp 'no-such-program-for-mulligan': the server did not start",
        ),
        ("'unclosed", '--mcp "\'unclosed": cannot read the command'),
        (
            f"read={START} --file-tool",
            "its tool 'file' would be offered as read_file, the name of a built-in tool;"
            f" give the server another name: --mcp 'NAME={START} --file-tool'",
        ),
    ],
)
def test_a_server_that_cannot_start_is_one_line_and_exit_2(
    spec: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer([]) as server:
        code = main(["attempt", "q", "--mcp", spec, "--base-url", server.base_url])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and message in err[0]


def test_without_the_sdk_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    with FakeOpenAIServer([]) as server:
        code = main(["attempt", "q", "--mcp", START, "--base-url", server.base_url])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == ['mulligan: MCP servers need the mcp package: pip install "mulligan[mcp]"']
    with FakeOpenAIServer([FakeReply(content="4")]) as server:  # no --mcp: no SDK needed
        assert main(["attempt", "2 + 2?", "--base-url", server.base_url]) == 0


def running(tag: str) -> list[str]:
    """Processes whose command line carries `tag`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if tag in cmdline and proc.name.isdigit():
            found.append(cmdline)
    return found


def test_a_call_that_outlasts_its_timeout_is_an_error_observation_not_a_hang() -> None:
    with MCPServers([START], call_timeout=1) as servers:
        registry = ToolRegistry.of(servers.tools)
        slow = registry.run(ToolCall(id="1", name="notes_wait", arguments='{"seconds": 30}'))
        quick = registry.run(ToolCall(id="2", name="notes_add", arguments='{"a": 1, "b": 2}'))
    assert slow.status == "error" and "gave no answer in 1s" in slow.output
    assert (quick.status, quick.output) == ("ok", "3")  # the server is still there


def test_a_server_that_never_answers_is_stopped_and_reported(tmp_path: Path) -> None:
    tag = f"--tag={tmp_path.name}"
    servers = MCPServers([f"{START} --hang-on-start {tag}"], start_timeout=2)
    with pytest.raises(UserError, match="did not answer within 2s"):
        servers.start()
    assert running(tag) == []


def test_bench_offers_mcp_tools_to_every_strategy(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        json.dumps({"id": "sum", "prompt": "2 + 3?", "checks": [{"type": "contains", "text": "5"}]})
    )

    def policy(body: dict[str, Any]) -> FakeReply:
        if body["messages"][-1]["role"] == "tool":
            return FakeReply(content=body["messages"][-1]["content"])
        return calls(("notes_add", {"a": 2, "b": 3}))

    with FakeOpenAIServer(policy=policy) as server:
        code = main(
            ["bench", str(tasks), "--strategies", "react,retry", "--trials", "1", "--mcp", START]
            + ["--design", "independent"]  # each strategy makes its own attempts
            + ["--out", str(tmp_path / "out"), "--base-url", server.base_url, "--embedding", "hash"]
        )
        tools = [{t["function"]["name"] for t in body.get("tools", [])} for body in server.requests]
    assert code == 0
    assert len(tools) == 4 and all("notes_add" in offered for offered in tools)
    assert "| react" in (tmp_path / "out" / "report.md").read_text()
