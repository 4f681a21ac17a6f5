"""Task files (YAML and JSON): good files load; unknown keys, wrong types, bad checks, syntax
errors and duplicate ids name file, line, task and field; budget flags override a task's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.errors import UserError
from mulligan.tasks.files import load_task_path

GOOD = """\
- id: add
  family: arithmetic
  prompt: What is 2 + 2?
  tools: [calculator]
  checks:
    - type: numeric
      value: 4
    - type: regex
      pattern: "\\\\b4\\\\b"
      visibility: hidden
  budget:
    max_steps: 4
- id: file-task
  prompt: Write hello to out.txt
  tools: [write_file]
  workspace:
    notes.md: "# notes"
  checks:
    - {type: file, path: out.txt, contains: hello}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def problems(path: Path) -> str:
    with pytest.raises(UserError) as caught:
        load_task_path(path)
    return str(caught.value)


def test_good_yaml_and_json_files_load(tmp_path: Path) -> None:
    tasks = load_task_path(write(tmp_path, "good.yaml", GOOD))
    assert [t.id for t in tasks] == ["add", "file-task"]
    assert tasks[0].budget and tasks[0].budget.max_steps == 4
    assert tasks[0].checks[1].visibility == "hidden"
    single = write(
        tmp_path,
        "one.json",
        '{"id": "j", "prompt": "p", "checks": [{"type": "contains", "text": "x"}]}',
    )
    assert load_task_path(single)[0].id == "j"
    assert len(load_task_path(tmp_path)) == 3  # a directory: every task file in it


def test_unknown_key_names_file_line_task_and_field(tmp_path: Path) -> None:
    text = GOOD.replace("    max_steps: 4", "    max_stepz: 4")
    message = problems(write(tmp_path, "bad.yaml", text))
    assert "bad.yaml:12: task 1 (id 'add'): budget.max_stepz: unknown key" in message


def test_wrong_type_and_missing_field(tmp_path: Path) -> None:
    text = "- id: a\n  prompt: p\n  tools: calculator\n- id: b\n  checks: []\n"
    message = problems(write(tmp_path, "bad.yaml", text))
    assert "bad.yaml:3: task 1 (id 'a'): tools: Input should be a valid list" in message
    assert "task 2 (id 'b'): prompt: missing" in message  # every bad task is listed


def test_bad_regex_and_unknown_check_type(tmp_path: Path) -> None:
    text = "id: r\nprompt: p\nchecks:\n  - type: regex\n    pattern: '(open'\n  - type: telepathy\n"
    message = problems(write(tmp_path, "bad.yaml", text))
    assert "bad.yaml:5: task 1 (id 'r'): checks.0.pattern:" in message and "bad regex" in message
    assert "checks.1" in message and "telepathy" in message


def test_yaml_and_json_syntax_errors(tmp_path: Path) -> None:
    message = problems(write(tmp_path, "broken.yaml", "id: a\nprompt: [unclosed\n"))
    assert "broken.yaml:" in message and "not valid YAML" in message
    message = problems(write(tmp_path, "broken.json", '{"id": "a",\n "prompt": }'))
    assert "broken.json:2:" in message and "not valid JSON" in message


def test_duplicate_ids(tmp_path: Path) -> None:
    check = "checks: [{type: contains, text: x}]"
    text = f"- {{id: a, prompt: p, {check}}}\n- {{id: a, prompt: q, {check}}}\n"
    assert "task id 'a' is used 2 times" in problems(write(tmp_path, "dup.yaml", text))


def test_tasks_command_exits_2_with_the_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "bad.yaml", "- id: a\n  prompt: p\n  colour: red\n")
    assert main(["tasks", str(path)]) == 2
    err = capsys.readouterr().err
    assert "colour: unknown key" in err and "Traceback" not in err
    good = write(tmp_path, "good.yaml", GOOD)
    assert main(["tasks", str(good)]) == 0
    assert "add\tarithmetic" in capsys.readouterr().out


def test_budget_flags_override_a_tasks_own_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from mulligan.testing import FakeOpenAIServer, FakeReply

    path = write(
        tmp_path,
        "t.yaml",
        "id: b\nprompt: add\ntools: [calculator]\nbudget: {max_steps: 6}\nchecks: [{type: numeric, value: 2}]\n",
    )
    asked = []

    def policy(body: dict[str, object]) -> FakeReply:
        asked.append(1)  # a fresh call each time: no repeat limit ends the attempt first
        expression = {"expression": f"1+{len(asked)}"}
        call = FakeReply(content=None, tool_calls=[{"name": "calculator", "arguments": expression}])
        return call if body.get("tools") else FakeReply(content="2")

    common = ["run", str(path), "--memory", str(tmp_path / "m"), "--embedding", "hash", "--json"]
    with FakeOpenAIServer(policy=policy) as server:
        assert main([*common, "--base-url", server.base_url]) == 0
        task_budget = len(server.requests)
        assert main([*common, "--base-url", server.base_url, "--max-steps", "2"]) == 0
        flagged = len(server.requests) - task_budget
    assert task_budget == 6 and flagged == 2
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["attempts"][0]["stop_reason"] == "answered"  # the forced last call answered


def test_a_field_or_key_named_like_a_check_type_is_named_with_its_line(tmp_path: Path) -> None:
    text = (
        "id: a\nprompt: p\nworkspace:\n  ok.txt: hi\n  strings.py: 5\n  file: [1]\n"
        "checks:\n  - {type: contains, text: x}\n  - {type: command, command: [ls]}\n"
    )
    message = problems(write(tmp_path, "bad.yaml", text))
    assert "bad.yaml:5: task 1 (id 'a'): workspace.strings.py: Input should be" in message
    assert "bad.yaml:6: task 1 (id 'a'): workspace.file: Input should be" in message
    assert "bad.yaml:9: task 1 (id 'a'): checks.1.command: Input should be" in message


TASK = "id: a\nprompt: p\nchecks: [{type: contains, text: x}]\n"
JSON_TASK = '{"id": "a", "prompt": "p", "checks": [{"type": "contains", "text": "x"}],\n'


@pytest.mark.parametrize(
    "name, text, says",
    [
        ("long.yaml", TASK + "budget: {max_steps: " + "9" * 5000 + "}\n", "long.yaml:4"),
        ("long.json", JSON_TASK + ' "budget": {"max_steps": ' + "9" * 5000 + "}}", "long.json:2"),
        ("date.yaml", TASK.replace("id: a", "id: 2024-13-01"), "date.yaml:1"),
        ("deep.yaml", TASK + "metadata: {x: " + "[" * 5000 + "]" * 5000 + "}\n", "deep.yaml"),
        ("deep.json", JSON_TASK + ' "metadata": ' + "[" * 5000 + "]" * 5000 + "}", "deep.json"),
    ],
)
def test_values_python_cannot_read_are_named_not_a_traceback(
    tmp_path: Path, name: str, text: str, says: str
) -> None:
    assert says in problems(write(tmp_path, name, text))


def test_json_too_deep_for_line_numbers_still_loads(tmp_path: Path) -> None:
    text = JSON_TASK + ' "metadata": {"x": ' + "[" * 900 + "]" * 900 + "}}"
    assert [t.id for t in load_task_path(write(tmp_path, "t.json", text))] == ["a"]


def line(task_id: str, extra: str = "") -> str:
    return f'{{"id": "{task_id}", "prompt": "p", "checks": [{{"type": "contains", "text": "x"}}]{extra}}}'


def test_a_json_lines_file_holds_a_task_a_line_and_names_each_line(tmp_path: Path) -> None:
    good = write(tmp_path, "t.jsonl", f"{line('a')}\n\n{line('b')}\n")
    assert [t.id for t in load_task_path(good)] == ["a", "b"]
    coloured = line("b", ', "colour": 1')
    unknown = write(tmp_path, "u.jsonl", f"{line('a')}\n\n{coloured}\n")
    assert "u.jsonl:3: task 2 (id 'b'): colour: unknown key" in problems(unknown)
    broken = write(tmp_path, "b.jsonl", f"{line('a')}\n{line('b')[:-1]}\n")
    assert "b.jsonl:2:" in problems(broken) and "not valid JSON" in problems(broken)


def test_a_directory_loses_no_task_file(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", TASK)
    write(tmp_path, "B.YAML", TASK.replace("id: a", "id: b"))
    write(tmp_path, "c.jsonl", line("c") + "\n")
    write(tmp_path, "notes.md", "# not a task file\n")
    assert sorted(t.id for t in load_task_path(tmp_path)) == ["a", "b", "c"]
    (tmp_path / "d.yaml").symlink_to(tmp_path / "moved-away.yaml")
    assert "d.yaml" in problems(tmp_path)


def test_text_yaml_reads_as_another_type_says_to_quote_it(tmp_path: Path) -> None:
    text = "id: 2024-01-01\nprompt: p\nchecks:\n  - {type: contains, text: no}\n"
    message = problems(write(tmp_path, "t.yaml", text))
    assert "t.yaml:1: task 1: id: Input should be a valid string" in message
    assert "t.yaml:4: task 1: checks.0.text: Input should be a valid string (got False; " in message
    assert message.count("put it in quotes") == 2
    empty = problems(
        write(tmp_path, "e.yaml", "id: a\nprompt:\nchecks: [{type: contains, text: x}]\n")
    )
    assert "prompt: Input should be a valid string (got None)" in empty  # nothing to quote


def test_a_tab_in_yaml_says_to_indent_with_spaces(tmp_path: Path) -> None:
    message = problems(write(tmp_path, "t.yaml", "- id: a\n\tprompt: p\n"))
    assert "t.yaml:2:1: not valid YAML" in message and "indent with spaces" in message
