"""What an MCP server lists is checked when it is listed: a tool whose input schema is not a
schema refuses the server in one line naming it, the tool and the fault; tools whose names
meet once made safe are both offered, under distinct names, each calling its own."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mulligan.actor import ToolRegistry
from mulligan.actor.mcp_tools import MCPServers
from mulligan.actor.tool_schemas import schema_fault
from mulligan.cli import main
from mulligan.errors import UserError
from mulligan.schema import ToolCall
from mulligan.testing import FakeOpenAIServer

RAW = Path(__file__).parents[1] / "helpers" / "raw_mcp_server.py"
GOOD = {"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}}}}


def serving(tmp_path: Path, *tools: dict[str, Any], name: str = "raw") -> str:
    """The --mcp spec of a hand-written server listing `tools` as they are."""
    listed = tmp_path / f"{name}.json"
    listed.write_text(json.dumps(list(tools)))
    return f"{name}={sys.executable} {RAW} {listed}"


def bad(schema: Any) -> dict[str, Any]:
    return {"name": "lookup", "description": "Look a word up.", "inputSchema": schema}


MALFORMED = [
    ({"type": "object", "properties": {"word": "string"}}, "has property 'word' as 'string'"),
    ({"type": "object", "properties": ["word"]}, "has 'properties' as a list"),
    ({"type": "object", "required": "word"}, "has 'required' as 'word'"),
    ({"type": "string"}, "has type 'string'"),
    ({"type": "object", "properties": {}, "required": ["term"]}, "requires 'term', which is not"),
]


@pytest.mark.parametrize(("schema", "fault"), MALFORMED)
def test_a_schema_fault_is_found_whatever_the_sdk_lets_through(schema: Any, fault: str) -> None:
    assert fault in schema_fault(schema)
    assert schema_fault({"type": "object", "properties": {"w": True}, "required": ["w"]}) == ""


def test_a_tool_requiring_a_property_it_lacks_refuses_its_server_naming_both(
    tmp_path: Path,
) -> None:
    schema = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["term"]}
    spec = serving(tmp_path, GOOD, bad(schema))
    servers = MCPServers([spec], start_timeout=20)
    with pytest.raises(UserError) as refused:
        servers.start()
    message = str(refused.value)
    assert message.startswith(f"--mcp {spec!r}: tool 'lookup' has an input schema that")
    assert "requires 'term', which is not among its properties" in message
    assert "fix the tool's inputSchema in the server" in message
    assert "'add'" not in message  # the good tool is not blamed
    assert all(s.gone for s in servers.servers)  # the refused server was stopped


@pytest.mark.parametrize("protocol", ["text", "native"])
@pytest.mark.parametrize(
    ("schema", "named"),
    [(MALFORMED[0][0], "at inputSchema.properties.word of the tool listed number 1"),
     (MALFORMED[-1][0], "tool 'lookup' has an input schema that requires 'term'")],
)  # fmt: skip
def test_a_malformed_schema_ends_a_run_in_one_line_before_the_model_is_asked(
    tmp_path: Path, protocol: str, schema: Any, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The SDK refuses the first listing itself, not the second: one line all the same."""
    spec = serving(tmp_path, bad(schema))
    with FakeOpenAIServer([]) as server:
        code = main(
            ["attempt", "Define mulligan", "--tools", "", "--mcp", spec]
            + ["--protocol", protocol, "--base-url", server.base_url]
        )
        asked = server.requests
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and asked == []
    assert len(err) == 1 and err[0].startswith(f"mulligan: --mcp {spec!r}: ")
    assert named in err[0] and "fix the tool's inputSchema in the server" in err[0]


def test_boolean_property_schemas_are_schemas_and_are_offered(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"anything": True}, "required": ["anything"]}
    with MCPServers([serving(tmp_path, bad(schema))], start_timeout=20) as servers:
        (lookup,) = servers.tools
        line = lookup.signature_line()
    assert lookup.schema()["function"]["parameters"]["properties"] == {"anything": True}
    assert '"anything": any' in line


def named(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"The tool {name}.", "inputSchema": {"type": "object"}}


def test_tools_whose_safe_names_meet_are_both_offered_each_calling_its_own(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`a.b` and `a_b` both become raw_a_b, as does `b` on a server named raw_a."""
    specs = [
        serving(tmp_path, named("a.b"), named("a_b")),
        serving(tmp_path, named("b"), name="raw_a"),
    ]
    with MCPServers(specs, start_timeout=20) as servers:
        offered = [t.name for t in servers.tools]
        registry = ToolRegistry.of(servers.tools)
        said = [registry.run(ToolCall(id=n, name=n, arguments="{}")).output for n in offered]
    assert offered == ["raw_a_b", "raw_a_b_2", "raw_a_b_3"]
    assert said == ["a.b {}", "a_b {}", "b {}"]
    assert "'a_b' of MCP server 'raw' is offered as raw_a_b_2" in caplog.text
