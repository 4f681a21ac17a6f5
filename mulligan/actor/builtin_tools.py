"""The built-in tools: calculator, python, shell, files in the workspace, search/lookup."""

from __future__ import annotations

import ast
import difflib
import math
import operator
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mulligan import sandbox
from mulligan.actor.tools import Tool, tool
from mulligan.errors import UserError
from mulligan.sandbox.safe_files import Unreadable, read_workspace_file, write_workspace_file

BUILTIN_TOOLS = (
    "calculator",
    "python",
    "shell",
    "read_file",
    "write_file",
    "list_files",
    "search",
    "lookup",
)

# ---------------------------------------------------------------- calculator

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    function.__name__: function
    for function in (abs, round, min, max, math.sqrt, math.log, math.log10, math.exp)
    + (math.sin, math.cos, math.tan, math.floor, math.ceil)
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
MAX_EXPONENT = 10_000


def evaluate_arithmetic(expression: str) -> float | int:
    """Evaluate arithmetic without eval: numbers, + - * / // % **, a few math functions."""
    tree = ast.parse(expression.strip().replace("^", "**"), mode="eval")
    return _evaluate(tree.body)


def _evaluate(node: ast.AST) -> Any:
    match node:
        case ast.Constant(value=int() | float() as value):
            return value
        case ast.Name(id=name) if name in _CONSTANTS:
            return _CONSTANTS[name]
        case ast.UnaryOp(op=op, operand=operand) if type(op) in _UNARY:
            return _UNARY[type(op)](_evaluate(operand))
        case ast.BinOp(op=op) if type(op) in _BINARY:
            left, right = _evaluate(node.left), _evaluate(node.right)
            if isinstance(op, ast.Pow) and abs(right) > MAX_EXPONENT:
                raise ValueError(f"exponent {right} is too large (limit {MAX_EXPONENT})")
            return _BINARY[type(op)](left, right)
        case ast.Call(func=ast.Name(id=name), args=args, keywords=[]) if name in _FUNCTIONS:
            return _FUNCTIONS[name](*[_evaluate(arg) for arg in args])
    raise ValueError(f"not allowed in arithmetic: {ast.unparse(node)!r}")


@tool(read_only=True)
def calculator(expression: str) -> str:
    """Use for arithmetic: evaluates an expression such as "(31.5 - 28) * 2" or "sqrt(2)"."""
    value = evaluate_arithmetic(expression)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return str(value)


# ---------------------------------------------------------------- workspace


class Workspace:
    """A directory the file tools may touch; paths outside it are refused.

    `scratch=True` marks a directory mulligan laid out itself: sandboxed code may write there.
    A user's own directory is only read by sandboxed code and changed by `write_file`.
    """

    def __init__(
        self,
        root: str | Path,
        scratch: bool = False,
        network: bool = False,
        policy: sandbox.Policy | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.scratch = scratch
        self.limits = sandbox.Limits(network=network)
        self.policy = policy
        """What the box hides from the code the python and shell tools run."""

    def resolve(self, path: str) -> Path:
        if Path(path).is_absolute():
            raise ValueError(f"absolute paths are not allowed ({path}); use a path relative to .")
        if ".." in Path(path).parts:
            raise ValueError(f"'..' is not allowed in paths ({path})")
        target = (self.root / path).resolve()
        if target != self.root and not target.is_relative_to(self.root):
            raise ValueError(f"{path} leads outside the workspace (through a symlink)")
        return target

    def visible(self, path: Path) -> bool:
        """Not hidden, nor inside a hidden directory (.git, .venv...)."""
        return not any(part.startswith(".") for part in path.relative_to(self.root).parts)

    def paths_named(self, name: str, most: int = 5) -> str:
        """For a path that is not there: where files (or directories) of that name are."""
        found = []
        for directory, subdirectories, files in os.walk(self.root):
            subdirectories[:] = [d for d in subdirectories if not d.startswith(".")]  # as visible()
            here = Path(directory).relative_to(self.root)
            found += [str(here / name) for n in files if n == name]
            found += [f"{here / name}/" for n in subdirectories if n == name]
        found = sorted(found)[:most]
        if found:
            return f"; paths named {name}: {', '.join(found)}"
        return f"; nothing named {name} in the workspace (list_files shows what is there)"

    def tools(self, shell_needs_approval: bool = True) -> list[Tool]:
        return [
            tool(self.python),
            tool(self.shell, needs_approval=shell_needs_approval),
            tool(self.read_file, read_only=True),
            tool(self.write_file, changes_state=True),
            tool(self.list_files, read_only=True),
        ]

    def python(self, code: str) -> str:
        """Use to run Python code (print what you need to see); runs in the workspace."""
        run = sandbox.run_python(
            code, cwd=self.root, writable=self.scratch, limits=self.limits, policy=self.policy
        )
        return run.describe()

    def shell(self, command: str) -> str:
        """Use to run a shell command in the workspace (ls, grep, wc, tests...)."""
        run = sandbox.run_shell(
            command, cwd=self.root, writable=self.scratch, limits=self.limits, policy=self.policy
        )
        return run.describe()

    def read_file(self, path: str) -> str:
        """Use to read a text file in the workspace, by relative path."""
        target = self.resolve(path)  # the usual refusals first, with their messages
        try:
            return read_workspace_file(self.root, path)
        except Unreadable as exc:
            where = "" if target.exists() else self.paths_named(target.name)
            raise ValueError(f"{exc}{where}") from None

    def write_file(self, path: str, content: str) -> str:
        """Use to create or overwrite a text file in the workspace, by relative path."""
        self.resolve(path)
        try:
            write_workspace_file(self.root, path, content)
        except Unreadable as exc:
            raise ValueError(str(exc)) from None
        return f"wrote {len(content)} characters to {path}"

    def list_files(self, path: str = ".") -> str:
        """Use to list the files under a workspace directory (recursively, relative paths)."""
        base = self.resolve(path)
        if base.is_file():
            return f"{path} is a file, not a directory: read it with read_file"
        if not base.exists():
            raise ValueError(f"{path} does not exist{self.paths_named(base.name)}")
        names = sorted(
            str(p.relative_to(self.root)) + ("/" if p.is_dir() else "")
            for p in base.rglob("*")
            if self.visible(p)
        )
        return "\n".join(names) if names else "(empty directory)"


# ---------------------------------------------------------------- search / lookup


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


class DocumentSearch:
    """ReAct's search[entity] and lookup[keyword] over a closed set of titled documents."""

    def __init__(self, documents: dict[str, str]) -> None:
        self.documents = documents
        self.current: str | None = None
        self.lookup_keyword = ""
        self.lookup_index = 0

    def search(self, entity: str) -> str:
        """Use to open a document by its title: shows its first paragraph, or similar titles."""
        wanted = _normal(entity)
        for title, text in self.documents.items():
            if _normal(title) == wanted:
                self.current, self.lookup_keyword, self.lookup_index = title, "", 0
                return text.split("\n\n")[0]
        titles = list(self.documents)
        normal_titles = {_normal(t): t for t in titles}
        close = difflib.get_close_matches(wanted, list(normal_titles), n=5, cutoff=0.6)
        partial = [t for t in titles if wanted and wanted in _normal(t)]
        similar = list(dict.fromkeys(partial + [normal_titles[c] for c in close]))[:5]
        shown = f"Similar: {similar}." if similar else "No similar titles."
        return f"Could not find [{entity}]. {shown}"

    def lookup(self, keyword: str) -> str:
        """Use after search: the next sentence in the open document containing the keyword."""
        if self.current is None:
            return "No document is open: search for an entity first."
        if keyword != self.lookup_keyword:
            self.lookup_keyword, self.lookup_index = keyword, 0
        hits = [
            s for s in split_sentences(self.documents[self.current]) if keyword.lower() in s.lower()
        ]
        if self.lookup_index >= len(hits):
            return f"No more results for [{keyword}] in {self.current}."
        self.lookup_index += 1
        return f"(Result {self.lookup_index} / {len(hits)}) {hits[self.lookup_index - 1]}"

    def tools(self) -> list[Tool]:
        return [tool(self.search), tool(self.lookup)]


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def build_tools(
    names: list[str],
    *,
    workspace: str | Path | None = None,
    scratch_workspace: bool = False,
    documents: dict[str, str] | None = None,
    extra: list[Tool] | None = None,
    shell_needs_approval: bool = True,
    network: bool = False,
    policy: sandbox.Policy | None = None,
) -> list[Tool]:
    """The tools a task asks for by name, bound to its workspace and documents; `policy`:
    what the box hides from the code they run."""
    made = [calculator]
    if workspace is not None:
        box = Workspace(workspace, scratch_workspace, network, policy)
        made += box.tools(shell_needs_approval)
    if documents is not None:
        made += DocumentSearch(documents).tools()
    available = {t.name: t for t in [*made, *(extra or [])]}  # a later one of a name wins
    missing = [name for name in names if name not in available]
    if missing:
        needs = dict.fromkeys(BUILTIN_TOOLS[1:6], "a workspace")
        needs |= dict.fromkeys(BUILTIN_TOOLS[6:], "documents")
        hints = [f"{n} (needs {needs[n]})" if n in needs else f"{n} (unknown)" for n in missing]
        raise UserError(
            f"tools not available: {', '.join(hints)}; built-in tools: {', '.join(BUILTIN_TOOLS)}"
        )
    return [available[name] for name in names]
