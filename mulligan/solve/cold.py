"""An edit the failing test cannot feel: every line it changes is in a function the test called
(traced in full) and is a line that did not run when it failed. Such an edit is refused
before the checks, naming the lines that did run: a small model often edits the branch next
to the one that goes wrong.

Only what the trace proves counts as not run: a function's own lines (not its signature or
decorators, not a function nested in it), whole statements (a statement that ran ran all its
lines), and only functions called while the test ran, whose record was not cut short. Any
other line, and a line put in beside one that ran, counts as run.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable, Mapping

from mulligan.solve.diffs import lines_of
from mulligan.solve.localise import UNPARSABLE, Function

Ran = Mapping[Function, set[int]]
"""The lines each function ran while the failing test ran, for the functions traced in full."""


def statements(source: str) -> tuple[dict[int, tuple[int, int, int]], dict[int, int]]:
    """Each line of a statement's own lines (a compound statement's header; a simple one's
    every line) -> (first, last, the `def` line of the innermost function holding it; 0:
    none); and each function's `def` line -> its last line."""
    try:
        tree = ast.parse(source)
    except UNPARSABLE:
        return {}, {}
    owned: dict[int, tuple[int, int, int]] = {}
    defs: dict[int, int] = {}

    def visit(node: ast.AST, function: int) -> None:
        for child in ast.iter_child_nodes(node):
            inner = function
            if isinstance(child, ast.stmt):
                body = getattr(child, "body", None)
                last = body[0].lineno - 1 if isinstance(body, list) and body else child.end_lineno
                for line in range(child.lineno, (last or child.lineno) + 1):
                    owned.setdefault(line, (child.lineno, last or child.lineno, function))
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                inner = child.lineno
                defs.setdefault(child.lineno, child.end_lineno or child.lineno)
            visit(child, inner)

    visit(tree, 0)
    return owned, defs


def touched(before: str, after: str) -> set[int]:
    """The lines of `before` an edit changes or removes, and both neighbours of a line it
    puts in (1-based)."""
    lines: set[int] = set()
    matcher = difflib.SequenceMatcher(None, lines_of(before), lines_of(after), autojunk=False)
    for kind, start, end, _, _ in matcher.get_opcodes():
        if kind in ("replace", "delete"):
            lines.update(range(start + 1, end + 1))
        elif kind == "insert":
            lines.update({start, start + 1})
    return lines


def cold_edit(ran: Ran, read: Callable[[str], str | None], texts: Mapping[str, str]) -> str | None:
    """Why the edit cannot change what the failing test does; None when it may."""
    said = []
    for path, text in texts.items():
        before = read(path)
        if before is None:
            return None
        owned, defs = statements(before)
        for line in sorted(touched(before, text)):
            function = _not_run(line, path, ran, owned, defs)
            if function is None:
                return None
            said.append((function, line))
    if not said:
        return None
    functions = list(dict.fromkeys(function for function, _ in said))
    where = "; ".join(
        f"`{f.name}` (lines {_spans(sorted({n for g, n in said if g == f}))} of {f.path}); "
        f"it ran lines {_spans(sorted(ran[f])) or 'none of its body'}"
        for f in functions
    )
    return (
        "the failing test never ran the lines this edit changes, so the edit cannot change "
        f"its result: {where}. The bug is in a line that ran (or in one that decides which "
        "lines run); change one of those."
    )


def _not_run(
    line: int,
    path: str,
    ran: Ran,
    owned: Mapping[int, tuple[int, int, int]],
    defs: Mapping[int, int],
) -> Function | None:
    """The function whose own body holds the line, when the trace proves it did not run."""
    if line not in owned:
        return None
    first, last, holder = owned[line]
    for function, lines in ran.items():
        if function.path != path or not function.holds(line) or not lines:
            continue
        own = min((d for d, end in defs.items() if function.holds(d) and end == function.end),
                  default=None)  # fmt: skip
        if holder == 0 or holder != own:
            return None  # its signature, a decorator, or a function nested in it
        return function if not set(range(first, last + 1)) & lines else None
    return None


def _spans(lines: list[int]) -> str:
    """`3-5, 9` for [3, 4, 5, 9]."""
    spans: list[list[int]] = []
    for line in lines:
        if spans and line == spans[-1][1] + 1:
            spans[-1][1] = line
        else:
            spans.append([line, line])
    return ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in spans)
