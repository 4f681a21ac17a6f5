"""Where a failing check points into the project: which test fails, the traceback's frames in
the project's own code (not the tests', not site-packages' or the standard library's), and
the functions to show the model.

Two ways to localise. With a traceback into the project's code, its innermost frames name
the functions. Without one (the assertion fails in the test itself), the project's functions
are ranked by what the failing test calls: the names in the test function (and in the test
module's helpers it calls), then what those functions call, read with `ast`.
"""

from __future__ import annotations

import ast
import re
import stat
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mulligan.solve.diffs import MAX_DIFF_BYTES

FRAME_PATTERNS = (
    re.compile(r'File "(?P<path>[^"]+\.py)", line (?P<line>\d+)'),  # a Python traceback
    re.compile(r"^(?P<path>[^\s:\"'()]+\.py):(?P<line>\d+):", re.MULTILINE),  # pytest's
)
INSTALLED = ("site-packages", "dist-packages", "/lib/python", "/usr/lib/", "<frozen")
FAILED_TEST = re.compile(r"^(?:FAILED|ERROR) (?P<path>[^\s:]+\.py)::(?P<name>[^\s]+)", re.M)
UNITTEST_FAIL = re.compile(r"^(?:FAIL|ERROR): (?P<name>\w+) \((?P<where>[\w.]+)\)", re.M)
ASSERTION = re.compile(r"^E {3,}.*$", re.MULTILINE)
EXCEPTION_LINE = re.compile(r"^\w+(?:\.\w+)*(?:Error|Exception|Failure)\b.*$", re.MULTILINE)
UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)
"""What `ast.parse` raises on source it cannot build a tree of: bad syntax, a null byte, or
nesting too deep (a generated table: CPython's own compiler cannot build it either)."""
SHOWN_FUNCTIONS = 3
"""At most this many functions go to the model at once (a small model loses itself in more)."""
NOT_CODE = frozenset({"docs", "doc", "examples", "benchmarks"})
"""Top-level folders whose functions a test's names are not looked up in (a traceback into
them still counts)."""
RANKED = 12
"""How many functions are ranked: candidates after the first are shown the later ones."""


@dataclass(frozen=True)
class Function:
    """A function or method of a file: 1-based lines, decorators included."""

    path: str
    name: str
    """Qualified within its module: `Version.bump_minor`."""
    start: int
    end: int

    @property
    def short(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    def holds(self, line: int) -> bool:
        return self.start <= line <= self.end

    def __str__(self) -> str:
        return f"{self.path}:{self.name}"


@dataclass
class Failure:
    """What a failing check's output says: the failing test, its assertion, the frames."""

    output: str
    tests: list[str] = field(default_factory=list)
    """Failing tests as the runner names them (`tests/test_x.py::test_y[1]`)."""
    assertion: str = ""
    project_frames: list[tuple[str, int]] = field(default_factory=list)
    """(path, line) in the project's code, outermost first."""
    test_frames: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class Localisation:
    functions: list[Function]
    """Ranked, best first; the model is shown `group(n)` of them."""
    how: str
    """`traceback` (frames into the project's code) or `calls` (what the failing test calls)."""
    test: Function | None = None
    """The failing test function, when it was found."""
    lines: dict[Function, int] = field(default_factory=dict)
    """The line a traceback names in a function."""

    def group(self, trial: int, size: int = SHOWN_FUNCTIONS) -> list[Function]:
        """What candidate `trial` is shown: odd trials the best-ranked functions, even ones
        the next ones in turn (trial 2 the 2nd group, 4 the 3rd, ..., then the 2nd again), so
        that more candidates cover more of the ranking while half of them stay on the best
        guess."""
        groups = [self.functions[i : i + size] for i in range(0, len(self.functions), size)]
        if not groups:
            return []
        if len(groups) == 1 or trial % 2:
            return groups[0]
        return groups[1 + (trial // 2 - 1) % (len(groups) - 1)]

    def shown(self, trials: int) -> list[list[Function]]:
        """The distinct groups `trials` candidates are shown, in order."""
        groups = [self.group(trial) for trial in range(1, trials + 1)]
        return [group for i, group in enumerate(groups) if group not in groups[:i]]


def is_test_file(path: str) -> bool:
    *folders, name = path.split("/")
    named = name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
    return named or bool({"tests", "test", "testing"} & set(folders))


def _project_path(raw: str, files: set[str]) -> str | None:
    """The project file a traceback's path names (it may be absolute, in a copy gone since)."""
    if any(marker in raw for marker in INSTALLED):
        return None
    parts = raw.replace("\\", "/").lstrip("./").split("/")
    candidates = ("/".join(parts[start:]) for start in range(len(parts)))
    return next((candidate for candidate in candidates if candidate in files), None)


def read_failure(output: str, files: Iterable[str]) -> Failure:
    known = set(files)
    failure = Failure(output)
    for pattern in FRAME_PATTERNS:
        for match in pattern.finditer(output):
            path = _project_path(match.group("path"), known)
            if path is None:
                continue
            frame = (path, int(match.group("line")))
            frames = failure.test_frames if is_test_file(path) else failure.project_frames
            if frame not in frames:
                frames.append(frame)
    failure.tests = [f"{m.group('path')}::{m.group('name')}" for m in FAILED_TEST.finditer(output)]
    failure.tests += [
        f"{m.group('where')}.{m.group('name')}" for m in UNITTEST_FAIL.finditer(output)
    ]
    # pytest's assertion lines, else the last exception's line
    said = ASSERTION.findall(output) or EXCEPTION_LINE.findall(output)[-1:]
    failure.assertion = "\n".join(said[:12])
    return failure


# ---------------------------------------------------------------- reading the code


def functions_of(path: str, source: str) -> list[Function]:
    """Every function and method in the source (nested ones too); [] if it does not parse."""
    try:
        tree = ast.parse(source)
    except UNPARSABLE:
        return []
    found: list[Function] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                name = prefix + child.name
                found.append(Function(path, name, start, child.end_lineno or child.lineno))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")

    visit(tree, "")
    return found


def innermost(functions: list[Function], line: int) -> Function | None:
    holding = [f for f in functions if f.holds(line)]
    return max(holding, key=lambda f: f.start) if holding else None


def _statement(source: str, function: Function) -> ast.stmt | None:
    """The function's lines parsed, dedented (a method's too): its first statement, None
    when they do not parse."""
    body = "\n".join(source.splitlines()[function.start - 1 : function.end])
    try:
        tree = ast.parse(textwrap.dedent(body))
    except UNPARSABLE:
        return None
    return tree.body[0] if tree.body else None


def _names(nodes: list[ast.AST]) -> list[str]:
    """The names and attributes used, in the order they are written."""
    found: list[tuple[int, int, str]] = []
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Name):
                found.append((node.lineno, node.col_offset, node.id))
            elif isinstance(node, ast.Attribute):  # `a.b`: b is written after a
                end = node.end_col_offset or node.col_offset
                found.append((node.end_lineno or node.lineno, end, node.attr))
    return list(dict.fromkeys(name for *_, name in sorted(found)))


def module_names(source: str) -> dict[str, list[str]]:
    """A module's top-level assignments: name -> the names its value uses (a table of
    lambdas that call functions, say)."""
    try:
        tree = ast.parse(source)
    except UNPARSABLE:
        return {}
    found: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = _names([node.value])
    return found


class Code:
    """The project's Python files, read once: its functions, by file and by short name."""

    def __init__(self, root: Path, files: Iterable[str]) -> None:
        self.sources: dict[str, str] = {}
        self.globals: dict[str, dict[str, list[str]]] = {}
        self.functions: dict[str, list[Function]] = {}
        for path in files:
            if not path.endswith(".py"):
                continue
            try:  # a regular file (a FIFO would block) whose edits a diff could carry
                info = (root / path).stat()
                if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_DIFF_BYTES:
                    continue
                source = (root / path).read_text(errors="replace")
            except OSError:
                continue
            self.sources[path] = source
            self.functions[path] = functions_of(path, source)
            self.globals[path] = module_names(source)
        self.by_name: dict[str, list[Function]] = {}
        for path, found in self.functions.items():
            if is_test_file(path) or path.split("/")[0] in NOT_CODE:
                continue
            for function in found:
                self.by_name.setdefault(function.short, []).append(function)

    def uses(self, function: Function) -> list[str]:
        """The names the function uses (called, read, attributes; in order of first use), and
        those its module's tables it uses refer to."""
        node = _statement(self.sources[function.path], function)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):  # not its decorators
            names = _names([*node.body, node.args])
        else:
            names = _names([node]) if node else []
        tables = self.globals.get(function.path, {})
        return list(dict.fromkeys(names + [n for name in names for n in tables.get(name, [])]))

    def at(self, path: str, line: int) -> Function | None:
        return innermost(self.functions.get(path, []), line)

    def named(self, path: str, name: str) -> Function | None:
        bare = name.split("[", 1)[0].replace("::", ".")
        return next((f for f in self.functions.get(path, []) if bare in (f.name, f.short)), None)


# ---------------------------------------------------------------- localising


def failing_test(failure: Failure, code: Code) -> Function | None:
    """The failing test function: the runner's name for it, else the innermost test frame."""
    for named in failure.tests:
        path, _, name = named.partition("::")
        found = code.named(path, name) if name else None
        if found:
            return found
    for path, line in reversed(failure.test_frames):
        found = code.at(path, line)
        if found:
            return found
    return None


def localise(failure: Failure, code: Code, limit: int = RANKED) -> Localisation:
    """The functions to show, best first, at most `limit`: the traceback's (innermost first),
    then what they call; without a frame in the project's code, what the failing test calls."""
    test = failing_test(failure, code)
    by_traceback: dict[Function, int] = {}
    for path, line in reversed(failure.project_frames):  # innermost first
        function = code.at(path, line)
        if function and function not in by_traceback:
            by_traceback[function] = line
    if by_traceback:
        start = list(by_traceback)
        ranked = start + [f for f in ranked_by_calls(start, code) if f not in by_traceback]
        return Localisation(ranked[:limit], "traceback", test, by_traceback)
    return Localisation(ranked_by_calls([test], code)[:limit] if test else [], "calls", test)


def ranked_by_calls(start: list[Function], code: Code, depth: int = 4) -> list[Function]:
    """The project's functions these call (a test: directly, or through its module's own
    helpers), then the ones those call, to `depth` levels; within a level, in order of first
    use. A test function itself is never ranked."""
    names: list[str] = []
    for function in start:
        names += [n for n in code.uses(function) if n not in names]
        if is_test_file(function.path):
            helpers = {f.short: f for f in code.functions.get(function.path, []) if f != function}
            for name in list(names):
                if name in helpers:
                    names += [n for n in code.uses(helpers[name]) if n not in names]
    ranked: list[Function] = []
    level = names
    for _ in range(depth):
        found = [f for name in level for f in code.by_name.get(name, []) if f not in ranked]
        found = [f for f in dict.fromkeys(found) if f not in start]
        ranked += found
        level = [n for f in found for n in code.uses(f)]
    return ranked


DOCSTRING_MARK = "... (docstring, lines {start}-{end})"
"""How shown code stands in for the lines of a docstring it leaves out."""
DOCSTRING_MARKED = re.compile(r"^\s*\|?\s*\.\.\. \(docstring, lines (\d+)-(\d+)\)\s*$")
"""That line, copied back by the model (with or without the bar before it)."""


def numbered(
    source: str, start: int, end: int, mark: int | None = None, hidden: range = range(0)
) -> str:
    """Lines start..end (1-based), each with its number; `mark`: the line a traceback names;
    `hidden`: lines left out (a docstring's), said in one line."""
    lines = source.splitlines()
    width = len(str(end))
    shown = []
    for number in range(start, min(end, len(lines)) + 1):
        if number in hidden and number != mark:
            if number == hidden.start:
                elided = DOCSTRING_MARK.format(start=number, end=hidden.stop - 1)
                shown.append(f"{'':>{width}} | {elided}")
            continue
        pointer = ">" if number == mark else " "
        shown.append(f"{number:>{width}}{pointer}| {lines[number - 1]}")
    return "\n".join(shown)


def docstring_body(source: str, function: Function) -> range:
    """The lines of the function's docstring after its first (empty: none, or one line), up
    to its first example (`>>> `) where it has one: examples say what the code should do."""
    node = _statement(source, function)
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.body:
        return range(0)
    first = node.body[0]
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)):
        return range(0)
    if not isinstance(first.value.value, str) or first.end_lineno == first.lineno:
        return range(0)
    offset = function.start - 1
    start, end = first.lineno + offset + 1, (first.end_lineno or first.lineno) + offset
    lines = source.splitlines()
    example = next((n for n in range(start, end) if lines[n - 1].lstrip().startswith(">>>")), end)
    return range(start, example)


def window(function: Function, around: int | None, size: int) -> tuple[int, int]:
    """The function's lines, or `size` of them around the line named (a long function)."""
    if function.end - function.start < size:
        return function.start, function.end
    centre = around if around is not None else function.start + size // 2
    start = max(function.start, centre - size // 2)
    return start, min(function.end, start + size - 1)
