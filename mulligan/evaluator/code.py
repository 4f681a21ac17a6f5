"""Candidate code: finding it in an answer, cleaning it, and the test harness around it."""

from __future__ import annotations

import ast
import re

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


HARNESS = """
import sys as _sys, traceback as _tb
_failed = 0
_total = 0
def _report(_source, _fn):
    global _failed, _total
    _total += 1
    try:
        _fn()
    except AssertionError as _e:
        _failed += 1
        print("FAILED: " + _source + (" -- " + str(_e) if str(_e) else ""))
    except Exception as _e:
        _failed += 1
        print("ERROR: " + _source + " -- " + type(_e).__name__ + ": " + str(_e)[:300])
"""


def harness_for(tests: str, entry_point: str | None = None) -> str:
    """Turn top-level asserts into reported checks that show what the call returned.

    Other statements (imports, helpers, `def check(candidate)`, calls) run as they are;
    with an entry point, `check(entry_point)` runs last, as HumanEval's tests expect.
    """
    if entry_point:
        tests = f"{tests}\n\ncheck({entry_point})"
    tree = ast.parse(tests)
    lines = [HARNESS]
    for node in tree.body:
        source = ast.unparse(node)
        if not isinstance(node, ast.Assert):
            lines.append(source)
            continue
        test = node.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            got, want = ast.unparse(test.left), ast.unparse(test.comparators[0])
            body = (
                f"    _got = {got}\n    _want = {want}\n"
                f"    assert _got == _want, 'got ' + repr(_got)[:300]"
            )
        else:
            body = f"    assert {ast.unparse(test)}"
        lines.append(f"def _case():\n{body}\n_report({source!r}, _case)")
    lines.append(
        "print(f'{_total - _failed}/{_total} asserts passed')\n_sys.exit(1 if _failed else 0)"
    )
    return "\n".join(lines)
