"""Tools from typed functions: the schema comes from the signature and docstring; the
calculator is arithmetic only, workspace paths are confined, the shell asks for approval,
and a missing file's error names the files of that name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mulligan.actor import ToolRegistry, build_tools, tool
from mulligan.actor.builtin_tools import DocumentSearch, Workspace, calculator, evaluate_arithmetic
from mulligan.errors import UserError
from mulligan.schema import ToolCall


def call(registry: ToolRegistry, name: str, arguments: str) -> tuple[str, str]:
    result = registry.run(ToolCall(id="c", name=name, arguments=arguments))
    return result.status, result.output


def test_schema_comes_from_signature_and_docstring() -> None:
    @tool
    def weather(city: str, unit: str = "C") -> str:
        """Use to get today's weather for a city."""
        return city

    schema = weather.schema()["function"]
    assert schema["name"] == "weather"
    assert schema["description"] == "Use to get today's weather for a city."
    assert schema["parameters"]["required"] == ["city"]
    assert schema["parameters"]["properties"]["unit"]["default"] == "C"


def test_a_renamed_or_redescribed_tool_offers_its_new_schema() -> None:
    @tool
    def weather(city: str) -> str:
        """Use to get today's weather for a city."""
        return city

    assert weather.schema() == weather.schema()
    weather.name, weather.description = "forecast", "Use to get tomorrow's weather."
    assert weather.schema()["function"]["name"] == "forecast"
    assert weather.schema()["function"]["description"] == "Use to get tomorrow's weather."
    assert weather.schema()["function"]["parameters"]["required"] == ["city"]


def test_calculator_is_arithmetic_only() -> None:
    assert evaluate_arithmetic("(31.5 - 28) * 2") == 7.0
    assert evaluate_arithmetic("2 ^ 10") == 1024
    registry = ToolRegistry.of([calculator])
    assert call(registry, "calculator", '{"expression": "sqrt(16) + 1"}') == ("ok", "5")
    status, output = call(
        registry, "calculator", "{\"expression\": \"__import__('os').system('id')\"}"
    )
    assert status == "error" and "not allowed" in output
    status, output = call(registry, "calculator", '{"expression": "9 ** 9 ** 9"}')
    assert status == "error" and "too large" in output
    assert call(registry, "calculator", '"1+1"') == ("ok", "2")  # a bare argument


def test_workspace_paths_are_confined(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    registry = ToolRegistry.of(Workspace(root).tools())
    assert call(registry, "read_file", '{"path": "a.txt"}') == ("ok", "inside")
    for path in ["../secret.txt", str(tmp_path / "secret.txt"), "link.txt"]:
        status, output = call(registry, "read_file", f'{{"path": "{path}"}}')
        assert status == "error", path
        assert "outside" not in output.split(":")[-1] or "workspace" in output
    status, _ = call(registry, "write_file", '{"path": "../evil.txt", "content": "x"}')
    assert status == "error" and not (tmp_path / "evil.txt").exists()
    assert call(registry, "write_file", '{"path": "sub/b.txt", "content": "hi"}')[0] == "ok"
    status, listing = call(registry, "list_files", "{}")
    assert "a.txt" in listing and "sub/b.txt" in listing


def test_shell_needs_approval_by_default(tmp_path: Path) -> None:
    registry = ToolRegistry.of(Workspace(tmp_path).tools())
    assert call(registry, "shell", '{"command": "echo hi"}')[0] == "denied"
    approved = ToolRegistry.of(Workspace(tmp_path).tools(), approve=lambda c: True)
    assert call(approved, "shell", '{"command": "echo hi"}') == ("ok", "hi")


def test_python_tool_reports_errors(tmp_path: Path) -> None:
    registry = ToolRegistry.of(Workspace(tmp_path, scratch=True).tools())
    status, output = call(registry, "python", '{"code": "print(1/0)"}')
    assert status == "ok"  # the tool ran; the program failed, and says so
    assert "ZeroDivisionError" in output and "exit status 1" in output


DOCS = {
    "ExampleAgent (software)": "ExampleAgent is a command-line tool. It was released in 2019.",
    "ExampleAgent (paper)": "ExampleAgent is a paper on agents. It was published in 2023. "
    "It was written by A. Author.",
    "Other": "Unrelated text.",
}


def test_search_and_lookup_semantics() -> None:
    docs = DocumentSearch(DOCS)
    assert docs.lookup("year").startswith("No document is open")
    broad = docs.search("ExampleAgent")
    assert broad.startswith("Could not find") and "ExampleAgent (paper)" in broad
    assert docs.search("exampleagent (paper)").startswith("ExampleAgent is a paper")
    assert docs.lookup("published") == "(Result 1 / 1) It was published in 2023."
    assert docs.lookup("published").startswith("No more results")
    assert docs.search("Nothing like it").endswith("No similar titles.")


def test_build_tools_names_what_is_missing() -> None:
    with pytest.raises(UserError, match="search \\(needs documents\\)"):
        build_tools(["calculator", "search"])
    with pytest.raises(UserError, match="telepathy \\(unknown\\)"):
        build_tools(["telepathy"])


def test_reading_a_file_that_is_not_there_names_the_files_of_that_name(tmp_path: Path) -> None:
    """Seen on the 1.5B model in `solve`: it read `inflection/test_inflection.py`, was told
    only that it did not exist, and wrote a test file of its own there."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "test_pkg.py").write_text("x")
    (tmp_path / "pkg" / "deep").mkdir()
    (tmp_path / "pkg" / "deep" / "test_pkg.py").write_text("y")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "test_pkg.py").write_text("z")
    registry = ToolRegistry.of(Workspace(tmp_path).tools())
    status, output = call(registry, "read_file", '{"path": "pkg/test_pkg.py"}')
    assert status == "error"
    assert "pkg/test_pkg.py does not exist" in output
    assert "test_pkg.py" in output.split("does not exist", 1)[1]
    assert "pkg/deep/test_pkg.py" in output and ".hidden" not in output
    status, output = call(registry, "read_file", '{"path": "nothing.py"}')
    assert status == "error" and "list_files" in output


def test_the_python_tool_imports_the_workspaces_own_modules(tmp_path: Path) -> None:
    """As `python -c` in the project would: seen on `solve`, where `import inflection` in
    the project's own directory failed (the script ran isolated, from a scratch directory)."""
    project = tmp_path / "project"
    project.mkdir()
    project.chmod(0o755)  # as a user's project is; the box's user may read it
    (project / "mymod.py").write_text("VALUE = 41\n")
    registry = ToolRegistry.of(Workspace(project).tools())
    status, output = call(registry, "python", '{"code": "import mymod\\nprint(mymod.VALUE + 1)"}')
    assert (status, output.strip()) == ("ok", "42")
    status, output = call(
        registry, "python", '{"code": "x = 1\\nraise SystemExit(f\\"{__name__} {x}\\")"}'
    )
    assert "__main__ 1" in output
    status, output = call(registry, "python", '{"code": "\\n\\n1/0"}')
    assert 'main.py", line 3' in output  # the model's own line numbers


def test_listing_a_file_or_a_missing_path_says_what_it_is(tmp_path: Path) -> None:
    """Seen on the 1.5B model in solve_real (isodate): `list_files` of a test file's path was
    answered "(empty directory)", and the model asked the same thing ten more times."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_datetime.py").write_text("x")
    (tmp_path / "empty").mkdir()
    registry = ToolRegistry.of(Workspace(tmp_path).tools())
    status, output = call(registry, "list_files", '{"path": "tests/test_datetime.py"}')
    assert status == "ok" and "tests/test_datetime.py is a file" in output
    assert "read_file" in output and "empty directory" not in output
    status, output = call(registry, "list_files", '{"path": "src/tests/test_datetime.py"}')
    assert status == "error" and "src/tests/test_datetime.py does not exist" in output
    assert "tests/test_datetime.py" in output.split("does not exist", 1)[1]
    assert call(registry, "list_files", '{"path": "empty"}') == ("ok", "(empty directory)")
    status, output = call(registry, "list_files", '{"path": "src/tests"}')
    assert status == "error" and output.split("does not exist", 1)[1].count("tests/") == 1


def test_a_tool_thread_is_kept_between_calls_but_never_given_to_a_call_after_a_timeout() -> None:
    """Tool functions run on kept threads (no thread started per call); a call that timed out
    keeps its thread, and the next call runs on another and is answered."""
    import threading

    release = threading.Event()

    @tool(timeout=0.2)
    def where(stall: bool) -> str:
        """Use to say which thread runs the tool."""
        if stall:
            release.wait(10)
        return str(threading.get_ident())

    registry = ToolRegistry.of([where])
    try:
        first, again = (registry.run(ToolCall(id=i, name="where", arguments='{"stall": false}'))
                        for i in ("1", "2"))  # fmt: skip
        assert first.status == again.status == "ok" and first.output == again.output
        stuck = registry.run(ToolCall(id="3", name="where", arguments='{"stall": true}'))
        assert stuck.status == "timeout"
        after = registry.run(ToolCall(id="4", name="where", arguments='{"stall": false}'))
        assert after.status == "ok" and after.output != first.output
    finally:
        release.set()


def test_a_file_name_that_is_not_utf8_is_shown_with_a_replacement_character(
    tmp_path: Path,
) -> None:
    """os.fsdecode keeps such a name's bytes as lone surrogates, which no request or log can
    carry as UTF-8: the output shows U+FFFD there, as a tool's error does."""
    (tmp_path / os.fsdecode(b"odd\xff.txt")).write_text("x")

    @tool
    def complain() -> str:
        """Use to fail."""
        raise ValueError(os.fsdecode(b"no \xfe here"))

    registry = ToolRegistry.of([*Workspace(tmp_path).tools(), complain])
    assert call(registry, "list_files", "{}") == ("ok", "odd\ufffd.txt")
    assert call(registry, "complain", "{}") == ("error", "Error: ValueError: no \ufffd here")
