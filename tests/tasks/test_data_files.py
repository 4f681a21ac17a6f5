"""A suite's `--data` file that is wrong in any way is one line naming the file, the line and
the field, and how it should be; a good one still loads, a long line included."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from mulligan.errors import UserError
from mulligan.tasks.suites import load_suite

CODE = {
    "entry_point": "f",
    "prompt": "def f(x):\n    pass\n",
    "test": "def check(candidate):\n    assert candidate(1) == 1\n",
}
MBPP = {"name": "mbpp_1_f", **CODE}
HUMANEVAL = {"task_id": "HumanEval/1", **CODE, "canonical_solution": "    return x\n"}
HOTPOT = {
    "_id": "q1",
    "question": "Is it?",
    "answer": "yes",
    "context": [["Title", ["One sentence.", " Two."]]],
}
LINES = {"mbpp": MBPP, "humaneval": HUMANEVAL}


def json_lines(rows: list[Any]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def hotpot_file(rows: list[Any]) -> str:
    """A HotpotQA list with each question on its own line, as a person would write one."""
    return "[\n" + ",\n".join(json.dumps(row) for row in rows) + "\n]\n"


def refused(tmp_path: Path, suite: str, text: str) -> str:
    path = tmp_path / "data.json"
    path.write_text(text)
    with pytest.raises(UserError) as caught:
        load_suite(suite, data=str(path))
    message = str(caught.value)
    assert len(message.splitlines()) == 1, message
    assert "Traceback" not in message
    return message.replace(str(path), "FILE")


@pytest.mark.parametrize("suite", ["mbpp", "humaneval"])
@pytest.mark.parametrize(
    ("field", "value"),
    [("prompt", 5), ("entry_point", None), ("test", ["x"]), ("prompt", {"a": 1})],
)
def test_a_code_field_that_is_not_text_names_its_line_and_field(
    tmp_path: Path, suite: str, field: str, value: object
) -> None:
    good = LINES[suite]
    rows = [good, {**good, "name": "b", "task_id": "b", field: value}]
    message = refused(tmp_path, suite, json_lines(rows))
    assert re.match(rf"FILE:2: field '{field}' must be text, not ", message), message


@pytest.mark.parametrize("suite", ["mbpp", "humaneval"])
def test_a_code_task_id_that_is_not_text_or_used_twice_is_refused(
    tmp_path: Path, suite: str
) -> None:
    good, key = LINES[suite], "name" if suite == "mbpp" else "task_id"
    message = refused(tmp_path, suite, json_lines([good, {**good, key: 7}]))
    assert message.startswith(f"FILE:2: field '{key}' must be text, not int"), message
    message = refused(tmp_path, suite, json_lines([good, {**good, key: "other"}, good]))
    assert message.startswith(f"FILE:3: field '{key}': id {good[key]!r} is on line 1 too")


def test_humaneval_rows_need_no_canonical_solution_but_name_what_they_lack(
    tmp_path: Path,
) -> None:
    path = tmp_path / "own.jsonl"
    path.write_text(json_lines([{k: v for k, v in HUMANEVAL.items() if k != "canonical_solution"}]))
    (task,) = load_suite("humaneval", data=str(path)).tasks
    assert task.id == "HumanEval/1"
    message = refused(tmp_path, "humaneval", json_lines([{"task_id": "x", "prompt": "p"}]))
    assert message.startswith("FILE:1: missing field(s) 'entry_point', 'test'"), message


@pytest.mark.parametrize("suite", ["mbpp", "humaneval", "hotpotqa"])
@pytest.mark.parametrize("text", ["", "\n\n", "[]\n"])
def test_a_data_file_without_tasks_is_refused(tmp_path: Path, suite: str, text: str) -> None:
    message = refused(tmp_path, suite, text)
    assert message.startswith("FILE"), message
    assert "no " in message or "expected" in message or "not valid JSON" in message


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({k: v for k, v in HOTPOT.items() if k != "answer"}, "answer"),
        ({**HOTPOT, "answer": 5}, "answer"),
        ({**HOTPOT, "_id": None}, "_id"),
        ({**HOTPOT, "question": None}, "question"),
        ({**HOTPOT, "context": 5}, "context"),
        ({**HOTPOT, "context": [["Title", "a string, not sentences"]]}, "context"),
        ({**HOTPOT, "context": [["Title"]]}, "context"),
        ({**HOTPOT, "context": [[1, ["s"]]]}, "context"),
        (5, "question"),
    ],
)
def test_a_hotpotqa_question_out_of_format_names_its_line_and_field(
    tmp_path: Path, row: object, field: str
) -> None:
    message = refused(tmp_path, "hotpotqa", hotpot_file([HOTPOT | {"_id": "q0"}, row]))
    assert message.startswith("FILE:3: "), message
    assert f"'{field}'" in message and "HotpotQA" in message, message


def test_hotpotqa_ids_used_twice_and_bad_json_name_the_line(tmp_path: Path) -> None:
    message = refused(tmp_path, "hotpotqa", hotpot_file([HOTPOT, HOTPOT]))
    assert message.startswith("FILE:3: field '_id': id 'q1' is on line 2 too"), message
    broken = hotpot_file([HOTPOT]).replace('"yes"', "yes")
    assert refused(tmp_path, "hotpotqa", broken).startswith("FILE:2: not valid JSON")
    assert "a JSON list" in refused(tmp_path, "hotpotqa", json_lines([HOTPOT]))


@pytest.mark.parametrize("suite", ["mbpp", "humaneval", "hotpotqa"])
@pytest.mark.parametrize(
    ("value", "said"),
    [("[" * 100_000, "nested"), ("1" * 5000, "digits")],
)
def test_json_too_deep_or_a_number_too_long_names_its_line(
    tmp_path: Path, suite: str, value: str, said: str
) -> None:
    good = LINES.get(suite, HOTPOT)
    line = json.dumps(good)[:-1] + f', "extra": {value}}}'
    text = (
        hotpot_file([good]).replace("\n]", f",\n{line}\n]")
        if suite == "hotpotqa"
        else json_lines([good]) + line + "\n"
    )
    message = refused(tmp_path, suite, text)
    assert message.startswith(f"FILE:{3 if suite == 'hotpotqa' else 2}: not valid JSON"), message
    assert said in message


@pytest.mark.parametrize("suite", ["mbpp", "humaneval"])
def test_a_line_separator_inside_a_json_string_is_no_line_break(tmp_path: Path, suite: str) -> None:
    """JSON writes U+2028, U+2029 and U+0085 raw in a string; only a newline ends a line."""
    prompt = 'def f(x):\n    """Say \u2028, \u2029 and \x85."""\n'
    path = tmp_path / "data.jsonl"
    row = {**LINES[suite], "prompt": prompt}
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    (task,) = load_suite(suite, data=str(path)).tasks
    assert task.metadata["signature_prompt"] == prompt


def test_good_data_files_load_with_a_ten_megabyte_line(tmp_path: Path) -> None:
    long = "x" * (10 << 20)
    path = tmp_path / "mbpp.jsonl"
    path.write_text(json_lines([{**MBPP, "prompt": f"def f(x):\n    '''{long}'''\n"}]))
    (task,) = load_suite("mbpp", data=str(path)).tasks
    assert long in task.prompt
    path = tmp_path / "hotpot.json"
    path.write_text(hotpot_file([HOTPOT, {**HOTPOT, "_id": "q2", "question": long}]))
    first, second = load_suite("hotpotqa", data=str(path)).tasks
    assert first.documents == {"Title": "One sentence. Two."}
    assert (first.id, second.id) == ("hotpotqa/q1", "hotpotqa/q2") and long in second.prompt
