"""The house rules, checked on the source: small files, an import graph without cycles,
nothing below the CLI importing it, and no strategy compared by name outside strategies/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "mulligan"
STRATEGY_NAME = re.compile(
    r"""["'](react|retry|reflexion|reflexion-memory|repair|memory-frozen)["']"""
)


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def top_level_imports(path: Path, known: set[str]) -> set[str]:
    """Modules of the package imported when this one loads (not under TYPE_CHECKING, not
    inside functions)."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    body = [
        n for n in tree.body if not (isinstance(n, ast.If) and "TYPE_CHECKING" in ast.dump(n.test))
    ]
    for node in body:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if name in known}


def test_no_file_is_over_400_lines() -> None:
    """The package's modules, and the tests, benchmarks and examples beside them."""
    root = PACKAGE.parent
    files = [
        p
        for top in ("mulligan", "tests", "benchmarks", "examples")
        for p in (root / top).rglob("*.py")
    ]
    long = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in files}
    assert {name: n for name, n in long.items() if n > 400} == {}


def test_the_import_graph_has_no_cycle() -> None:
    found = modules()
    graph = {name: top_level_imports(path, set(found)) - {name} for name, path in found.items()}
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == "done":
            return
        assert state.get(name) != "open", f"import cycle: {' -> '.join([*trail, name])}"
        state[name] = "open"
        for other in sorted(graph[name]):
            if not name.startswith(other + "."):  # a package's own __init__ is not a cycle
                visit(other, [*trail, name])
        state[name] = "done"

    for name in sorted(graph):
        visit(name, [])


def test_nothing_below_the_cli_imports_it() -> None:
    found = modules()
    for name, path in found.items():
        if name == "mulligan.cli" or name.startswith("mulligan.cli."):
            continue
        text = path.read_text()
        assert "mulligan.cli" not in text and "from mulligan import cli" not in text, name


def test_no_strategy_is_compared_by_name_outside_strategies() -> None:
    """The strategy object answers; its name is only a key (the demo's script names the
    strategies it expects figures for)."""
    allowed = {"mulligan.bench.demo", "mulligan.loop"}  # the loop's LoopSettings default
    for name, path in modules().items():
        if name.startswith("mulligan.strategies") or name in allowed:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if STRATEGY_NAME.search(line) and (
                "==" in line or "startswith" in line or " in " in line
            ):
                raise AssertionError(f"{path.name}:{number} compares a strategy's name: {line}")
