"""What a task file can get wrong beyond its shape: found when it loads, not when a run fails.

Each problem is (path inside the task, message); the loader turns the path into a line.
A task whose tests do not parse or whose callable check does not import would otherwise
be scored as the model's failure.
"""

from __future__ import annotations

import ast
import importlib
import posixpath

from mulligan.actor.builtin_tools import BUILTIN_TOOLS
from mulligan.schema import (
    CONTROL_CHARACTERS,
    CallableCheck,
    FileCheck,
    PythonTestsCheck,
    Task,
)

Problem = tuple[tuple[str | int, ...], str]
DOCUMENT_TOOLS = ("search", "lookup")


def task_problems(task: Task) -> list[Problem]:
    never = "the task has no checks, so no attempt could ever pass; add one"
    return [
        *([(("checks",), never)] if not task.checks else []),
        *_tool_problems(task, set(BUILTIN_TOOLS)),
        *_workspace_problems(task),
        *_check_problems(task),
    ]


def _tool_problems(task: Task, known: set[str]) -> list[Problem]:
    problems: list[Problem] = []
    for position, name in enumerate(task.tools):
        where = ("tools", position)
        if name not in known:
            usable = ", ".join(sorted(known))
            problems.append((where, f"unknown tool {name!r}; use one of {usable}"))
        elif name in DOCUMENT_TOOLS and task.documents is None:
            problems.append((where, f"{name} needs documents: add `documents:` (title: text)"))
    return problems


def _workspace_problems(task: Task) -> list[Problem]:
    problems: list[Problem] = []
    files: dict[str, str] = {}
    for relative in task.workspace or {}:
        normal = posixpath.normpath(relative.replace("\\", "/"))
        where = ("workspace", relative)
        problem = _path_problem(relative)
        if problem:
            problems.append((where, problem))
        elif normal in files:
            problems.append(
                (where, f"{relative!r} is the same file as {files[normal]!r}; keep one")
            )
        else:
            files[normal] = relative
    for normal, relative in files.items():
        folders = [normal[:i] for i, c in enumerate(normal) if c == "/"]
        for folder in (f for f in folders if f in files):
            said = f"{relative!r} needs a folder {folder!r}, but {files[folder]!r} is a file"
            problems.append((("workspace", relative), f"{said}; rename one of them"))
    return problems


def _check_problems(task: Task) -> list[Problem]:
    problems: list[Problem] = []
    for position, check in enumerate(task.checks):
        if isinstance(check, PythonTestsCheck):
            try:
                ast.parse(check.tests)
                ast.parse(check.prelude)
            except SyntaxError as exc:
                said = f"the tests do not parse: {exc.msg} (line {exc.lineno} of the tests)"
                problems.append((("checks", position, "tests"), said))
        elif isinstance(check, CallableCheck):
            problem = callable_problem(check.function)
            if problem:
                problems.append((("checks", position, "function"), problem))
        if isinstance(check, FileCheck) or (isinstance(check, PythonTestsCheck) and check.file):
            field = "path" if isinstance(check, FileCheck) else "file"
            relative = getattr(check, field)
            problem = _path_problem(relative)
            if not problem and ".." in relative.split("/"):  # the box opens no `..`
                problem = f"{relative!r}: write it without '..' ({posixpath.normpath(relative)!r})"
            if problem:  # the check could never read it: every attempt would fail
                problems.append((("checks", position, field), problem))
    return problems


def _path_problem(relative: str) -> str | None:
    """Why a file a task names cannot be one inside the workspace, or None."""
    normal = posixpath.normpath(relative.replace("\\", "/"))
    if CONTROL_CHARACTERS.search(relative):
        return "a path cannot hold a NUL, a newline or other control character"
    if relative.startswith(("/", "\\")) or normal == ".." or normal.startswith("../"):
        return (
            f"{relative!r} would lie outside the workspace; use a path inside it, relative "
            "to the workspace"
        )
    if normal in ("", "."):
        return "a workspace file needs a file name"
    return None


def callable_problem(spec: str) -> str | None:
    """Why `module:function` cannot be called, or None."""
    module_name, colon, function_name = spec.partition(":")
    if not colon or not module_name or not function_name:
        return f"{spec!r} is not module:function"
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any failure to import is the task file's problem
        return f"cannot import {module_name}: {type(exc).__name__}: {exc}"
    if not callable(getattr(module, function_name, None)):
        return f"{module_name} has no function {function_name!r}"
    return None
