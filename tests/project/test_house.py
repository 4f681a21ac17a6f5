"""The house rules, checked on the source: small files, an import graph without cycles,
nothing below the CLI importing it, and no strategy compared by name outside strategies/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "mulligan"
STRATEGY_NAME = re.compile(
    r"""["'](react|retry|warming|reflexion|reflexion-memory|repair|memory-frozen|select-diverse)["']"""
)


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Every module of the package this one imports: at the top, inside functions and under
    TYPE_CHECKING alike (an import that runs later still ties the two together)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, `level - 1` packages up
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(path, name, set(found)) for name, path in found.items()}


LAYERS: list[tuple[str, ...]] = [
    ("cli",),
    ("view",),
    ("report",),
    ("studies",),
    ("solve",),
    ("agent",),
    ("runs",),
    ("testing",),
    ("loop",),
    ("strategies",),
    ("tasks",),
    ("actor", "evaluator", "reflector", "memory"),
    ("llm",),
    ("schema",),
    ("settings",),
    ("sandbox", "prompts", "inputs", "data"),
    ("errors", "defaults", "text_cut", "untrusted", "jsontext"),
]
"""The house from the top down (the same as the README's map of what is where): a module
imports its own package's modules and those of the layers below its own, never a layer
above, nor another package of its own layer (so the four components never import each
other)."""


def place(name: str) -> tuple[int, str]:
    """(layer, package) of a module of the package."""
    first = name.split(".")[1] if name.count(".") else ""
    for layer, packages in enumerate(LAYERS):
        if first in packages:
            return layer, first
    raise AssertionError(f"{name} is in no layer: add its package to LAYERS and the map")


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
    """Counting every import, inside functions and under TYPE_CHECKING too."""
    graph = import_graph()
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == "done":
            return
        assert state.get(name) != "open", f"import cycle: {' -> '.join([*trail, name])}"
        state[name] = "open"
        for other in sorted(graph[name]):
            visit(other, [*trail, name])
        state[name] = "done"

    for name in sorted(graph):
        visit(name, [])


def test_every_import_goes_down_the_layers() -> None:
    upward = []
    for name, imported in import_graph().items():
        if name == "mulligan":
            continue
        layer, package = place(name)
        for other in sorted(imported):
            other_layer, other_package = place(other)
            if other_package != package and other_layer <= layer:
                upward.append(f"{name} -> {other}")
    assert upward == []


def test_the_map_names_every_package() -> None:
    """The README's table of what is where names each package of the layer list."""
    readme = (PACKAGE.parent / "README.md").read_text()
    folders = [p for layer in LAYERS for p in layer if (PACKAGE / p).is_dir()]
    assert [p for p in folders if f"mulligan/{p}/" not in readme] == []


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
    allowed = {"mulligan.studies.demo", "mulligan.loop"}  # the loop's LoopSettings default
    for name, path in modules().items():
        if name.startswith("mulligan.strategies") or name in allowed:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if STRATEGY_NAME.search(line) and (
                "==" in line or "startswith" in line or " in " in line
            ):
                raise AssertionError(f"{path.name}:{number} compares a strategy's name: {line}")


# ---------------------------------------------------------------- one pipeline, one definition

PIPELINE = "mulligan.cli.pipeline"
BUILDER = "mulligan.runs.build"
RUN_RECORD = "mulligan.runs.lifecycle"


def calls_in(path: Path) -> list[tuple[str, int]]:
    """The names called in a module (`f(...)`, and `x.f(...)` unless x is a standard
    module such as sqlite3), with their lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                if getattr(func.value, "id", "") in ("sqlite3", "socket", "ray"):
                    continue
                found.append((func.attr, node.lineno))
            else:
                found.append((getattr(func, "id", ""), node.lineno))
    return found


def callers_of(names: set[str], within: str = "mulligan") -> set[str]:
    return {
        module
        for module, path in modules().items()
        if module.startswith(within) and any(name in names for name, _ in calls_in(path))
    }


def test_one_place_connects_and_only_the_pipeline_opens_the_executor_and_memory_for_a_command() -> (
    None
):
    """Connecting is the builder's (runs/build.py `connect_models`), which the commands ask
    through their pipeline and an `Agent` directly; the executor and a command's memory are the
    pipeline's (cli/pipeline.py); the llm package and the memory package define them."""
    assert callers_of({"connect", "connect_endpoint"}) - {"mulligan.llm.connect"} == {BUILDER}
    assert callers_of({"open_executor"}) == {PIPELINE}
    assert callers_of({"Memory"}, within="mulligan.cli") == {PIPELINE}


def test_only_the_run_record_writes_manifests_and_starts_or_ends_runs() -> None:
    """A manifest is built in runs/lifecycle.py alone; a run is started and ended there (through
    `lifecycle`, which the pipeline and a transfer study's learning phase use)."""
    assert callers_of({"start_run", "resume_run", "end_run", "check_resume"}) - {
        "mulligan.memory"
    } == {RUN_RECORD}
    assert callers_of({"prompt_hashes", "versions"}) == {RUN_RECORD}
    assert callers_of({"lifecycle"}) == {PIPELINE, "mulligan.studies.transfer"}


def test_loops_are_built_in_one_place() -> None:
    """`runs/build.py` makes every Loop: the commands, studies and Ray workers call `loop_for`."""
    assert callers_of({"Loop"}) == {"mulligan.runs.build"}
    assert callers_of({"build_loop"}) == {"mulligan.runs.build"}


SETTING_MODULES = {
    "mulligan.settings.run_config",
    "mulligan.settings.sections",
    "mulligan.settings.endpoints",
}


def setting_names() -> dict[str, set[str]]:
    """Each section's field names."""
    from mulligan.settings.fields import settings

    found: dict[str, set[str]] = {}
    for one in settings():
        found.setdefault(one.section, set()).add(one.name)
    return found


def test_no_setting_is_defined_twice() -> None:
    """A setting's type, bounds, default and help are its field's: no other class repeats a
    section's fields, no flag table exists, and no parser adds a setting's flag by hand (the
    memory commands' own --memory/--embedding read an existing memory, with their own
    defaults)."""
    from mulligan.settings.fields import settings

    names = setting_names()
    options = {str(one.option) for one in settings() if one.option}
    by_hand_ok = {"--memory", "--embedding"}
    for module, path in modules().items():
        text = path.read_text()
        assert "FLAG_BOUNDS" not in text, module
        if module in SETTING_MODULES:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):  # a class repeating a section's fields
                fields = {
                    n.target.id
                    for n in node.body
                    if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                }
                for section, own in names.items():
                    repeated = sorted(fields & own)
                    assert len(repeated) < 2, f"{module}.{node.name} repeats [{section}] {repeated}"
            adds = isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"
            if adds and module.startswith("mulligan.cli"):  # mulligan's own commands' parsers
                given = {a.value for a in node.args if isinstance(a, ast.Constant)}
                assert not (given & options - by_hand_ok), f"{module}:{node.lineno}: {given}"


def test_the_default_temperatures_are_named_once() -> None:
    pattern = re.compile(r"temperature\s*=\s*0\.\d|REPEATED_TEMPERATURE\s*=|0\.7 if ")
    for module, path in modules().items():
        if module == "mulligan.settings.sections":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not pattern.search(line), f"{path.name}:{number}: {line.strip()}"
