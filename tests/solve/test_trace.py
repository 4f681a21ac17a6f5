"""The repair prompt shows what the implicated code did on the failing test: its arguments,
the lines that ran with the values they made, and what it returned, recorded by running that
test alone in a throwaway copy of the project. The project itself is never touched, and a
check that is not pytest gets no trace."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from mulligan.solve.trace import assertion_sides, one_side_holds
from tests.helpers.solving import files_of, solve
from tests.solve.projects import CHECK, RIGHT, WRONG, make_shapes, prompts_sent, replying

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
MANY_STEPS = (
    "def total(values):\n"
    "    result = 0\n"
    "    for value in values:\n"
    "        result = result + value * 2\n"
    "    return result\n"
)
"""total() doubles each value: the bug."""


def pytest_shapes(root: Path, area: str | None = None) -> Path:
    """The shapes project with test functions pytest collects, and no top-level calls."""
    project = make_shapes(root) if area is None else make_shapes(root, area)
    (project / "tests" / "test_area.py").write_text(
        "from shapes.area import rect, square\n\n\n"
        "def test_square():\n    assert square(3) == 9\n\n\n"
        "def test_rect():\n    assert rect(2, 5) == 10\n"
    )
    return project


def first_repair_prompt(
    tmp_path: Path, project: Path, check: str, capsys: pytest.CaptureFixture[str]
) -> str:
    code, server = solve(tmp_path, project, replying(RIGHT), check=check)
    assert code == 0
    prompt = prompts_sent(server.requests)[0]
    traced = [line for line in capsys.readouterr().err.splitlines() if "test traced" in line]
    assert bool(traced) == ("failing test ran it" in prompt)  # solve says when it traced
    return prompt


def test_the_first_repair_prompt_shows_what_the_failing_call_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = pytest_shapes(tmp_path / "shapes")
    before = files_of(project)
    prompt = first_repair_prompt(tmp_path, project, PYTEST, capsys)
    assert "What that code did when the failing test ran it" in prompt
    trace = prompt.split("What that code did when the failing test ran it", 1)[1]
    assert "`rect` called with width = 2, height = 5" in trace
    assert "   6 | return width + height\n>   returned 7" in trace
    assert "square" not in trace.split("returned 7")[0]  # only the failing test ran
    assert files_of(project) == before  # nothing of the plugin or its record is left behind


def test_each_line_shows_the_values_it_made(tmp_path: Path) -> None:
    area = MANY_STEPS
    project = make_shapes(tmp_path / "sums", area)
    (project / "tests" / "test_area.py").write_text(
        "from shapes.area import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n"
    )
    fix = (
        "shapes/area.py\n<<<<<<< SEARCH\n        result = result + value * 2\n=======\n"
        "        result = result + value\n>>>>>>> REPLACE\n"
    )
    code, server = solve(tmp_path, project, replying(fix), check=PYTEST)
    assert code == 0
    trace = prompts_sent(server.requests)[0].split("failing test ran it", 1)[1]
    assert "`total` called with values = [1, 2]" in trace
    assert "result = 0    -> result = 0" in trace
    assert trace.count("   3 | for value in values:") == 3  # a line that changes nothing too
    assert "   5 | return result\n>   returned 6" in trace
    assert "result = result + value * 2    -> result = 2" in trace
    assert "result = result + value * 2    -> result = 6" in trace
    assert "returned 6" in trace


def test_a_unittest_test_case_is_traced_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pytest reports a TestCase's failure after the call, not as the call's exception."""
    project = make_shapes(tmp_path / "shapes")
    (project / "tests" / "test_area.py").write_text(
        "import unittest\n\nfrom shapes.area import rect\n\n\n"
        "class AreaTests(unittest.TestCase):\n"
        "    def test_rect(self):\n        self.assertEqual(rect(2, 5), 10)\n"
    )
    prompt = first_repair_prompt(tmp_path, project, PYTEST, capsys)
    assert "`rect` called with width = 2, height = 5" in prompt


def test_a_record_the_project_forged_is_read_as_far_as_it_is_well_formed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The traced run is the project's own code: a test that overwrites the record with
    junk gets its junk left out, not a crash of `solve`."""
    project = pytest_shapes(tmp_path / "shapes")
    (project / "tests" / "test_area.py").write_text(
        "import atexit, json, os\n\nfrom shapes.area import rect\n\n\n"
        "def forge(path):\n"
        "    calls = [{'target': 0, 'events': [['line', 'x', 5], 7, ['call', 1, {'a': 1}]]},\n"
        "             {'target': 'x'}, 'junk']\n"
        "    with open(path, 'w') as out:\n"
        "        json.dump({'calls': calls}, out)\n\n\n"
        "def test_rect():\n"
        "    spec = json.loads(os.environ.get('MULLIGAN_TRACE') or '{}')\n"
        "    if spec:  # written after pytest wrote the real record\n"
        "        atexit.register(forge, spec['out'])\n"
        "    assert rect(2, 5) == 10\n"
    )
    code, server = solve(tmp_path, project, replying(RIGHT), check=PYTEST)
    assert code == 0, capsys.readouterr().err
    prompt = prompts_sent(server.requests)[0]
    assert "`rect` called with a = 1" in prompt and "'x'" not in prompt.split("ran it")[-1]


def test_a_record_that_is_not_an_object_gives_no_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = pytest_shapes(tmp_path / "shapes")
    (project / "tests" / "test_area.py").write_text(
        "import atexit, json, os\n\nfrom shapes.area import rect\n\n\n"
        "def test_rect():\n"
        "    spec = json.loads(os.environ.get('MULLIGAN_TRACE') or '{}')\n"
        "    if spec:\n"
        "        atexit.register(lambda: open(spec['out'], 'w').write('[1, 2]'))\n"
        "    assert rect(2, 5) == 10\n"
    )
    prompt = first_repair_prompt(tmp_path, project, PYTEST, capsys)
    assert "failing test ran it" not in prompt


def test_a_check_that_is_not_pytest_gets_no_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_shapes(tmp_path / "shapes")
    prompt = first_repair_prompt(tmp_path, project, CHECK, capsys)
    assert "failing test ran it" not in prompt


def test_a_check_that_sets_its_own_pythonpath_is_still_traced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = pytest_shapes(tmp_path / "shapes")
    check = f"PYTHONPATH=. {sys.executable} -m pytest -q -p no:cacheprovider tests"
    prompt = first_repair_prompt(tmp_path, project, check, capsys)
    assert "`rect` called with width = 2, height = 5" in prompt


CHAIN = (
    "def square(side):\n    return side * side\n\n\n"
    "def rect(width, height):\n    return first(width) + second(height) + third(0) + fourth(0)\n\n\n"
    + "".join(
        f"def {name}(value):\n    return value + 0\n\n\n" for name in ("first", "second", "third")
    )
    + "def fourth(value):\n    return value + 1\n"
)
"""rect() calls four helpers: the first candidate is shown rect and two of them, the second
candidate the others."""
SHOWN = re.compile(r"^\S+, `(\w+)`:$", re.MULTILINE)
CALLED = re.compile(r"^> \S+, `(\w+)` called with", re.MULTILINE)


def test_each_candidate_sees_the_calls_of_the_functions_it_is_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = pytest_shapes(tmp_path / "shapes", CHAIN)
    argv = ("--trials", "2", "--concurrency", "2")
    code, server = solve(tmp_path, project, replying(WRONG), *argv, check=PYTEST)
    assert code == 1
    assert "the failing test traced: 5 calls of 5 functions" in capsys.readouterr().err
    groups = set()
    for prompt in prompts_sent(server.requests):  # two candidates' first prompts and re-asks
        shown, called = SHOWN.findall(prompt), CALLED.findall(prompt)
        assert called and set(called) == set(shown), (shown, called)
        groups.add(frozenset(shown))
    assert len(groups) == 2 and "fourth" in set().union(*groups)


def test_long_or_unprintable_values_are_cut_not_fatal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A value too long to show whole, and one whose repr raises, in the same traced call."""
    area = (
        "class Unprintable:\n"
        "    def __repr__(self):\n"
        "        raise RuntimeError('no repr')\n"
        "\n"
        "\n"
        "def square(side):\n"
        "    return side * side\n"
        "\n"
        "\n"
        "def rect(width, height):\n"
        "    long = 'x' * 500\n"
        "    junk = Unprintable()\n"
        "    return width + height\n"
    )
    project = pytest_shapes(tmp_path / "shapes", area)
    prompt = first_repair_prompt(tmp_path, project, PYTEST, capsys)
    trace = prompt.split("failing test ran it", 1)[1]
    assert "returned 7" in trace
    assert "long = 'x' * 500    -> long = 'xxx" in trace and "x" * 200 not in trace
    assert "<repr failed: RuntimeError>" in trace


LABEL = (
    "def square(side):\n    return side * side\n\n\n"
    "def label(width, height):\n"
    "    return head(width, height) + sep() + tail() + unit() + area_text(width, height)\n\n\n"
    "def head(width, height):\n    return f'{width}x{height}'\n\n\n"
    "def sep():\n    return ' = '\n\n\n"
    "def tail():\n    return ''\n\n\n"
    "def unit():\n    return ''\n\n\n"
    "def area_text(width, height):\n    return str(width + height)\n"
)
"""label() is built by five helpers; area_text(), the last, adds where it should multiply."""


def test_a_function_that_returned_a_wrong_part_of_the_result_is_shown_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """By what the test calls, area_text ranks sixth (the second candidate's group); it
    returned '7', which is in the result the test got ('2x5 = 7') and not in the one it
    expected ('2x5 = 10'): the smallest such value, so the first candidate is shown it."""
    project = pytest_shapes(tmp_path / "shapes", LABEL)
    (project / "tests" / "test_area.py").write_text(
        "from shapes.area import label\n\n\ndef test_label():\n"
        "    assert label(2, 5) == '2x5 = 10'\n"
    )
    fix = (
        "shapes/area.py\n<<<<<<< SEARCH\n    return str(width + height)\n=======\n"
        "    return str(width * height)\n>>>>>>> REPLACE\n"
    )
    code, server = solve(tmp_path, project, replying(fix), check=PYTEST)
    assert code == 0
    said = capsys.readouterr().err
    assert "calls: shapes/area.py:area_text, shapes/area.py:label, shapes/area.py:head;" in said
    assert SHOWN.findall(prompts_sent(server.requests)[0])[0] == "area_text"


@pytest.mark.parametrize(
    ("value", "held"),
    [
        ("'7'", True),  # a one-character string: as a token
        ("7", True),
        ("0", False),  # in "10" only as a digit of it
        ("'-0400'", True),
        ("'2x5'", False),  # in both sides
        ("None", False),
        ("''", False),
        ("'2x5 = …", False),  # cut: the part kept is in both
    ],
)
def test_a_returned_value_counts_when_one_side_of_the_assertion_holds_it(
    value: str, held: bool
) -> None:
    sides = ("'2x5 = 7-0400'", "'2x5 = 10+0400'")
    assert one_side_holds(value, sides) is held
    assert assertion_sides("E   AssertionError: assert 'a' == 'b'\nE  - b") == ("'a'", "'b'")
    assert assertion_sides("E   AssertionError: assert 3 < 2") is None
