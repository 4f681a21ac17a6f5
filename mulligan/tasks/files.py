"""Task files: one task or a list of tasks, in YAML or JSON, validated with every error named."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, get_args

import pydantic
import yaml

from mulligan.errors import UserError
from mulligan.inputs.paths import read_text
from mulligan.schema import Check, Task
from mulligan.tasks.validate import task_problems

TASK_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")


def _load_placed(path: Path) -> list[tuple[Task, str]]:
    """The file's tasks, each with its place (`file:line`); a UserError lists every problem."""
    text = read_text(path, "task file")
    data, root = _parse(path, text)
    items, nodes = _task_items(path, data, root)
    placed, problems = [], []
    for position, (item, node) in enumerate(zip(items, nodes, strict=False), start=1):
        label = f"task {position}"
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            label += f" (id {item['id']!r})"
        try:
            task = Task.model_validate(item)
        except pydantic.ValidationError as exc:
            for error in exc.errors():
                loc = _without_union_tags(error["loc"])
                line = _line_of(node, loc)
                field = _field(loc) or "(the task itself)"
                problems.append(f"{path}:{line}: {label}: {field}: {_expected(error)}")
            continue
        for where, problem in task_problems(task):
            line = _line_of(node, where)
            problems.append(f"{path}:{line}: {label}: {_field(where)}: {problem}")
        placed.append((task, f"{path}:{_line_of(node, ())}"))
    if problems:
        raise UserError(f"{len(problems)} problem(s) in task files:\n" + "\n".join(problems))
    return placed


def _field(loc: Iterable[Any]) -> str:
    """`checks.0.text`; a part that would not print as one line (a NUL, a newline) quoted."""
    return ".".join(p if isinstance(p, str) and p.isprintable() else repr(p) for p in loc)


def _refuse_duplicates(placed: list[tuple[Task, str]]) -> None:
    """Two tasks with one id would share one episode (and one verdict): name every place."""
    places: dict[str, list[str]] = {}
    for task, place in placed:
        places.setdefault(task.id, []).append(place)
    problems = [
        f"task id {tid!r} is used {len(where)} times: at {', '.join(where)}; "
        "give each task its own id"
        for tid, where in places.items()
        if len(where) > 1
    ]
    if problems:
        raise UserError(f"{len(problems)} problem(s) in task files:\n" + "\n".join(problems))


def _parse(path: Path, text: str) -> tuple[Any, yaml.Node | None]:
    """The data and, for line numbers, its YAML node tree. JSON is read by `json`, and by PyYAML
    for lines only: tabs become spaces first (valid JSON has tabs only between tokens, where
    YAML refuses them); JSON that PyYAML still cannot read loads without line numbers."""
    is_json = path.suffix.lower() in (".json", ".jsonl")
    if path.suffix.lower() == ".jsonl":
        text = _json_lines_as_list(path, text)
    duplicates: list[str] = []
    if is_json:
        try:
            data = json.loads(text, object_pairs_hook=_noting_duplicates(duplicates))
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from exc
        except ValueError as exc:  # the one other: an integer longer than Python reads
            digits = re.search(rf"\d{{{sys.get_int_max_str_digits() + 1},}}", text)
            line = text.count("\n", 0, digits.start()) + 1 if digits else "?"
            said = f"a number longer than Python reads ({sys.get_int_max_str_digits()} digits)"
            raise UserError(f"{path}:{line}: {said}; quote it to keep it as text") from exc
        except RecursionError as exc:
            raise UserError(f"{path}: {TOO_DEEP}") from exc
    try:
        root = yaml.compose(text.replace("\t", " ") if is_json else text, Loader=yaml.SafeLoader)
        if not is_json:
            data = yaml.load(text, Loader=_ValueMarkingLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        if not is_json:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
            problem = getattr(exc, "problem", None) or str(exc)
            tabbed = "'\\t'" in problem or "tab character" in problem
            problem += "; indent with spaces, not tabs" if tabbed else ""
            raise UserError(f"{where}: not valid YAML: {problem}") from exc
        root = None
    except RecursionError as exc:
        if not is_json:
            raise UserError(f"{path}: {TOO_DEEP}") from exc
        root = None  # JSON deeper than PyYAML reads: loaded, without line numbers
    _refuse_duplicate_keys(path, root, duplicates)
    return data, root


TOO_DEEP = "nested more deeply than Python reads; flatten the data"


def _json_lines_as_list(path: Path, text: str) -> str:
    """JSON Lines (a task a line, blank lines skipped) as one JSON list, each task on its own
    line still; a line that is not JSON is named with its column."""
    lines, first = text.split("\n"), True
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number}:{exc.colno}: not valid JSON: {exc.msg}") from exc
        except (ValueError, RecursionError):
            pass  # read again in the list, and named there
        lines[number - 1] = line if first else "," + line
        first = False
    return "[" + "\n".join(lines) + "]"


class _ValueMarkingLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a value it cannot build (a date with month 13, an
    integer longer than Python reads) is a YAML error at its line, not a bare ValueError."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except ValueError as exc:
            why = str(exc).split("; use sys.")[0]  # not advice for a task file's author
            said = f"cannot read {node.value!r:.40}: {why}; quote it to keep it as text"
            raise yaml.constructor.ConstructorError(None, None, said, node.start_mark) from exc


def _noting_duplicates(found: list[str]) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        for key, value in items:
            if key in mapping:
                found.append(key)
            mapping[key] = value
        return mapping

    return pairs


def _refuse_duplicate_keys(path: Path, root: yaml.Node | None, found: list[str]) -> None:
    """A key given twice in one mapping: the parsers keep the last one without a word."""
    problems = [
        f"{path}:{key.start_mark.line + 1}: key {key.value!r} given twice (first on line "
        f"{first.start_mark.line + 1}); the last would silently win: keep one"
        for key, first in sorted(_repeated_keys(root), key=lambda pair: pair[0].start_mark.line)
    ]
    if not problems and found:  # JSON that PyYAML cannot read: no lines
        problems = [
            f"{path}: key {key!r} given twice; the last would silently win: keep one"
            for key in found
        ]
    if problems:
        raise UserError(f"{len(problems)} problem(s) in task files:\n" + "\n".join(problems))


def _repeated_keys(root: yaml.Node | None) -> Iterator[tuple[yaml.Node, yaml.Node]]:
    """(the repeated key, its first occurrence) in every mapping, each node visited once
    (aliases share nodes, and may even make cycles)."""
    todo, visited = [root], set()
    while todo:
        node = todo.pop()
        if not isinstance(node, yaml.CollectionNode) or id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            todo.extend(node.value)
            continue
        seen: dict[tuple[str, str], yaml.Node] = {}
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                if (key.tag, key.value) in seen:
                    yield key, seen[(key.tag, key.value)]
                seen.setdefault((key.tag, key.value), key)
        todo.extend(value for _, value in node.value)


def _task_items(path: Path, data: Any, root: yaml.Node | None) -> tuple[list[Any], list[Any]]:
    if isinstance(data, dict) and "tasks" in data and set(data) <= {"tasks"}:
        data = data["tasks"]
        root = _child(root, "tasks")
    if isinstance(data, dict):
        return [data], [root]
    if isinstance(data, list) and data:
        nodes = root.value if isinstance(root, yaml.SequenceNode) else [None] * len(data)
        return data, list(nodes)
    if data is None or data == []:
        raise UserError(f"{path}: no task in it; write a task (a mapping) or a list of tasks")
    raise UserError(
        f"{path}: expected a task (a mapping) or a list of tasks, found {type(data).__name__}"
    )


def _child(node: yaml.Node | None, key: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if k.value == str(key):
                return v  # type: ignore[no-any-return]
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key]  # type: ignore[no-any-return]
    return None


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | str:
    """The line of the deepest node along the error's path (1-based), or '?'."""
    best = node
    for part in loc:
        child = _child(best, part)
        if child is None:
            break
        best = child
    return best.start_mark.line + 1 if best is not None else "?"


CHECK_TYPES = {m.model_fields["type"].default for m in get_args(get_args(Check)[0])}


def _without_union_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """The error's path without the union members pydantic names in it: a check's type after
    its index (`checks.1.regex.pattern`) and a check field's type (`answer.list[str]`). Only
    there: a field or a workspace file may be named `command` or `strings.py`."""
    if loc[:1] != ("checks",) or len(loc) < 3 or loc[2] not in CHECK_TYPES:
        return loc
    rest = (p for p in loc[3:] if not (isinstance(p, str) and p.startswith(("str", "list["))))
    return (*loc[:2], *rest)


def _expected(error: Any) -> str:
    kind, message = error["type"], error["msg"]
    if kind == "extra_forbidden":
        return "unknown key (remove it or check its spelling)"
    if kind == "missing":
        return "missing (this field is required)"
    if kind == "union_tag_invalid":
        return f"{message}"
    got = f"got {error.get('input')!r:.80}"
    if kind == "string_type" and not isinstance(error.get("input"), dict | list | None):
        got += "; put it in quotes to make it text"  # YAML reads `no` as false, `1.0` as a number
    return f"{message.removeprefix('Value error, ')} ({got})"


def load_task_path(path: Path) -> list[Task]:
    """A task file, or every task file under a directory (sorted by path); one UserError
    lists every problem with file, line, task and field."""
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.suffix.lower() in TASK_SUFFIXES and (p.is_file() or not p.exists())
        )  # a link to a file moved away is named below, not skipped
        if not files:
            raise UserError(
                f"{path}: no task files (*.yaml, *.yml, *.json, *.jsonl) in this directory"
            )
    elif not path.exists():
        raise UserError(f"{path}: no such file or suite")
    elif not path.is_file():
        raise UserError(f"{path}: not a regular file; give a task file or a directory of them")
    else:
        files = [path]
    problems, placed = [], []
    for file in files:
        try:
            placed += _load_placed(file)
        except UserError as exc:
            problems.append(str(exc))
    if problems:
        raise UserError("\n".join(problems))
    _refuse_duplicates(placed)
    return [task for task, _ in placed]
