"""The real projects of benchmarks/solve_real.py and their planted one-line bugs: each project
is fetched as its sdist when the benchmark runs (never committed); a bug counts only if the
project's own suite passes untouched and fails with the bug planted, in the box."""

from __future__ import annotations

import difflib
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from mulligan.sandbox import Policy
from mulligan.schema import CommandCheck, Task
from mulligan.solve.copies import Project, ProjectCopies
from mulligan.solve.preflight import cannot_run, preflight

PYTEST = "{python} -m pytest -q -x -p no:cacheprovider"


@dataclass(frozen=True)
class Source:
    name: str
    version: str
    check: str  # run in the project's root; {python}: the interpreter that has pytest


@dataclass(frozen=True)
class Bug:
    project: str
    id: str
    path: str
    find: str
    replace: str  # `find` occurs once in `path`; the two differ in one line


SOURCES = {
    s.name: s
    for s in [
        Source("inflection", "0.5.1", f"{PYTEST} test_inflection.py"),
        Source("isodate", "0.7.2", f"PYTHONPATH=src {PYTEST} tests"),
        Source(
            "humanize",
            "4.11.0",
            f"PYTHONPATH=src {PYTEST} -o addopts= -o filterwarnings= tests/test_number.py "
            "tests/test_filesize.py tests/test_lists.py",
        ),  # fmt: skip
        Source("toolz", "1.0.0", f"{PYTEST} toolz/tests"),
        Source("semver", "3.0.2", f"PYTHONPATH=src {PYTEST} -o addopts= tests"),
        Source("webcolors", "24.8.0", f"PYTHONPATH=src {PYTEST} -o addopts= tests"),
        Source("cachetools", "5.5.0", f"PYTHONPATH=src {PYTEST} -o addopts= tests"),
    ]
}
INFLECTION, ISODATE = "inflection/__init__.py", "src/isodate/isotzinfo.py"
BUGS = [
    Bug("inflection", "inflection-dasherize", INFLECTION,
        "return word.replace('_', '-')", "return word.replace('_', ' ')"),
    Bug("inflection", "inflection-ordinal", INFLECTION,
        "number = abs(int(number))", "number = int(number)"),
    Bug("isodate", "isodate-tzsign", ISODATE,
        'tzsign = ((tzsign == "-") and -1) or 1', 'tzsign = ((tzsign == "+") and -1) or 1'),
    Bug("isodate", "isodate-isoformat-sign", ISODATE,
        'sign = ((seconds < 0) and "-") or "+"', 'sign = ((seconds > 0) and "-") or "+"'),
    Bug("humanize", "humanize-list-and", "src/humanize/lists.py",
        'return f"{str(items[0])} and {str(items[1])}"',
        'return f"{str(items[0])}, {str(items[1])}"'),
    Bug("humanize", "humanize-filesize-base", "src/humanize/filesize.py",
        "if abs_bytes < base:", "if abs_bytes <= base:"),
    Bug("toolz", "toolz-countby", "toolz/recipes.py",
        "return frequencies(map(key, seq))", "return frequencies(seq)"),
    Bug("toolz", "toolz-partitionby", "toolz/recipes.py",
        "map(tuple, pluck(1, itertools", "map(tuple, pluck(0, itertools"),
    Bug("semver", "semver-bump-minor", "src/semver/version.py",
        "return cls(self._major, self._minor + 1)",
        "return cls(self._major, self._minor + 1, self._patch)"),
    Bug("semver", "semver-prerelease-length", "src/semver/version.py",
        "return _cmp(len(a), len(b))", "return _cmp(len(b), len(a))"),
]  # fmt: skip
WEBCOLORS, CACHETOOLS = "src/webcolors/_normalization.py", "src/cachetools/keys.py"
MORE_BUGS = [
    Bug("webcolors", "webcolors-hex-expand", WEBCOLORS,
        'hex_digits = "".join(2 * s for s in hex_digits)',
        'hex_digits = "".join(s for s in hex_digits)'),
    Bug("webcolors", "webcolors-percent-clip", WEBCOLORS,
        'return "0%" if percent < 0 else "100%" if percent > 100 else f"{percent}%"',
        'return "0%" if percent < 0 else "100%" if percent > 10 else f"{percent}%"'),
    Bug("webcolors", "webcolors-hex-to-rgb", "src/webcolors/_conversion.py",
        "return IntegerRGB(int_value >> 16, int_value >> 8 & 0xFF, int_value & 0xFF)",
        "return IntegerRGB(int_value >> 16, int_value >> 4 & 0xFF, int_value & 0xFF)"),
    Bug("webcolors", "webcolors-rgb-to-hex", "src/webcolors/_conversion.py",
        'return f"#{red:02x}{green:02x}{blue:02x}"', 'return f"#{red:02x}{blue:02x}{green:02x}"'),
    Bug("cachetools", "cachetools-typedkey", CACHETOOLS,
        "key += tuple(type(v) for v in args)", "key += tuple(v for v in args)"),
    Bug("cachetools", "cachetools-currsize", "src/cachetools/__init__.py",
        "self.__currsize += diffsize", "self.__currsize += size"),
]  # fmt: skip
"""Added after the first ten: webcolors and cachetools (the first ten stay the comparison)."""
BUGS += MORE_BUGS


# ---------------------------------------------------------------- setting up


def check_python(work: Path) -> Path:
    """A virtual environment with pytest, from an interpreter the box's user can reach."""
    env = work / "checkenv"
    python = env / "bin" / "python"
    if python.exists() and subprocess.run([python, "-c", "import pytest"]).returncode == 0:
        return python
    base = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    subprocess.run([base, "-m", "venv", "--clear", str(env)], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "pytest"], check=True)
    return python


def fetch(source: Source, work: Path) -> Path:
    """The project's sdist, unpacked once into work/pristine."""
    tree = work / "pristine" / f"{source.name}-{source.version}"
    if tree.is_dir():
        return tree
    sdists = work / "sdists"
    spec = f"{source.name}=={source.version}"
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
    subprocess.run([*pip, spec, "-d", str(sdists)], check=True)
    archive = next(sdists.glob(f"{source.name}-{source.version}.tar.gz"))
    with tarfile.open(archive) as tar:
        if sys.version_info >= (3, 12):
            tar.extractall(tree.parent, filter="data")
        else:
            members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
            if any(m.name.startswith("/") or ".." in Path(m.name).parts for m in members):
                raise SystemExit(f"{archive}: unsafe member paths")
            tar.extractall(tree.parent, members=members)
    return tree


def plant(bug: Bug, pristine: Path, target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(pristine, target)
    path = target / bug.path
    text = path.read_text()
    if text.count(bug.find) != 1:
        raise SystemExit(f"{bug.id}: {bug.find!r} occurs {text.count(bug.find)} times in {path}")
    planted = text.replace(bug.find, bug.replace)
    changed = [
        line
        for line in difflib.unified_diff(text.splitlines(), planted.splitlines(), n=0)
        if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))
    ]
    if len(changed) != 2:
        raise SystemExit(f"{bug.id}: not a one-line change ({changed})")
    path.write_text(planted)
    return target


def checks_as_run(directory: Path, check: str) -> tuple[bool, str | None]:
    """Whether the check passes in the box, and why it cannot run (as `solve`'s preflight)."""
    task = Task(id="verify", prompt="verify", checks=[CommandCheck(command=check, timeout=300)])
    (done,) = preflight(ProjectCopies(Project(directory)), task, Policy())
    return done.run.ok, cannot_run(done, directory)


def verified(bug: Bug, pristine: Path, planted: Path, check: str) -> str:
    """'' when the suite passes untouched and fails with the bug; else what is wrong."""
    passes, broken = checks_as_run(pristine, check)
    if broken or not passes:
        return f"{bug.project}'s own suite does not pass untouched: {broken or 'it fails'}"
    fails, broken = checks_as_run(planted, check)
    if broken or fails:
        return f"{bug.id}: the planted bug {'cannot run: ' + str(broken) if broken else 'passes'}"
    return ""
