"""Candidate code: finding it in an answer, cleaning it, and the test harness around it."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_BLOCK = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.S | re.I)


def last_code_block(answer: str) -> str:
    """The last fenced code block of an answer, or the whole answer when it has none."""
    blocks = _BLOCK.findall(answer)
    if blocks:
        return str(blocks[-1])
    unclosed = re.search(r"```[ \t]*(?:python|py)?[ \t]*\n(.*)$", answer, re.S | re.I)
    return unclosed.group(1) if unclosed else answer


def _is_constant(node: ast.AST) -> bool:
    return not any(isinstance(n, (ast.Call, ast.Await, ast.Yield)) for n in ast.walk(node))


def keep_definitions(code: str) -> str:
    """Drop top-level code other than imports, definitions and constants (as evalplus does).

    Models often append examples, prints or asserts of their own, which would fail
    or slow a correct function. Code that does not parse is returned unchanged, so
    the tests report the syntax error.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    kept: list[ast.stmt] = [
        node
        for node in tree.body
        if isinstance(
            node,
            (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef),
        )
        or (isinstance(node, (ast.Assign, ast.AnnAssign)) and _is_constant(node))
    ]
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))


def harness_report(raw: str) -> dict[str, Any] | None:
    """The harness's report (see harness.py), or None when it wrote none or a malformed one."""
    try:
        report = json.loads(raw[8:])
    except ValueError:
        return None
    if not isinstance(report, dict) or report.get("complete") is not True:
        return None
    tests, failures = report.get("tests"), report.get("failures")
    if not isinstance(tests, int) or not isinstance(failures, list):
        return None
    return {"tests": tests, "failures": [str(f) for f in failures]}
