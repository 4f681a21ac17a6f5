"""Localisation from a failing check's output: a traceback into the project's code picks the
function it goes through; frames in site-packages, the standard library or the tests do not;
without a project frame, the functions the failing test calls are shown instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from mulligan.solve.localise import Code, Function, docstring_body, localise, numbered, read_failure
from tests.solve.projects import make_shapes

INTO_PROJECT = """Traceback (most recent call last):
  File "/tmp/copy-123/tests/test_area.py", line 13, in <module>
    test_rect()
  File "/tmp/copy-123/tests/test_area.py", line 9, in test_rect
    assert rect(2, 5) == 10, rect(2, 5)
  File "/tmp/copy-123/shapes/area.py", line 6, in rect
    return width + height
TypeError: unsupported operand
"""
INTO_SITE_PACKAGES = """Traceback (most recent call last):
  File "/usr/lib/python3.12/site-packages/shapes/area.py", line 6, in rect
    return width + height
  File "/usr/lib/python3.12/json/__init__.py", line 2, in loads
TypeError: unsupported operand
"""
PYTEST = """_______________________________ test_rect ________________________________

    def test_rect():
>       assert rect(2, 5) == 10, rect(2, 5)
E       AssertionError: 7
E       assert 7 == 10

tests/test_area.py:9: AssertionError
=========================== short test summary info ============================
FAILED tests/test_area.py::test_rect - AssertionError: 7
"""


def code_of(tmp_path: Path) -> Code:
    root = make_shapes(tmp_path / "p")
    files = ["shapes/__init__.py", "shapes/area.py", "tests/test_area.py"]
    return Code(root, files)


def test_a_traceback_into_the_project_picks_its_function(tmp_path: Path) -> None:
    code = code_of(tmp_path)
    failure = read_failure(INTO_PROJECT, code.sources)
    assert failure.project_frames == [("shapes/area.py", 6)]
    found = localise(failure, code)
    assert found.how == "traceback"
    assert [str(f) for f in found.functions] == ["shapes/area.py:rect"]
    assert found.test is not None and found.test.name == "test_rect"
    assert found.lines[found.functions[0]] == 6


def test_frames_in_site_packages_or_the_stdlib_are_not_the_project(tmp_path: Path) -> None:
    code = code_of(tmp_path)
    failure = read_failure(INTO_SITE_PACKAGES, code.sources)
    assert failure.project_frames == [] and failure.test_frames == []
    assert localise(failure, code).functions == []


def test_a_traceback_into_the_tests_only_shows_what_the_test_calls(tmp_path: Path) -> None:
    code = code_of(tmp_path)
    failure = read_failure(PYTEST, code.sources)
    assert failure.project_frames == []  # the test's own line is no project frame
    assert failure.tests == ["tests/test_area.py::test_rect"]
    assert "assert 7 == 10" in failure.assertion
    found = localise(failure, code)
    assert found.how == "calls"
    assert [str(f) for f in found.functions] == ["shapes/area.py:rect"]  # not square


def test_ranking_follows_calls_into_the_project(tmp_path: Path) -> None:
    area = (
        "def square(side):\n    return side * side\n\n\n"
        "def rect(width, height):\n    return _times(width, height)\n\n\n"
        "def _times(a, b):\n    return a + b\n"
    )
    root = make_shapes(tmp_path / "p", area)
    code = Code(root, ["shapes/area.py", "tests/test_area.py"])
    found = localise(read_failure(PYTEST, code.sources), code)
    assert [f.name for f in found.functions] == ["rect", "_times"]


def test_later_candidates_are_shown_the_next_functions_in_the_ranking(tmp_path: Path) -> None:
    steps = "".join(f"def step{i}(x):\n    return x\n\n\n" for i in range(1, 8))
    calls = " + ".join(f"step{i}(width)" for i in range(1, 8))
    root = make_shapes(tmp_path / "p", steps + f"def rect(width, height):\n    return {calls}\n")
    code = Code(root, ["shapes/area.py", "tests/test_area.py"])
    found = localise(read_failure(PYTEST, code.sources), code)
    assert [f.name for f in found.functions] == ["rect"] + [f"step{i}" for i in range(1, 8)]
    names = [[f.name for f in found.group(trial)] for trial in range(1, 11)]
    assert names[0] == names[2] == names[4] == ["rect", "step1", "step2"]  # the best guess
    assert names[1] == ["step3", "step4", "step5"] and names[3] == ["step6", "step7"]
    assert names[5] == names[9] == names[1] and names[7] == names[3]  # the rest in turn
    assert found.shown(4) == [found.group(1), found.group(2), found.group(4)]


ORDINAL = '''def ordinal(number):
    """
    The suffix that denotes a position: 1st, 2nd, 3rd, 4th.

    Examples::

        >>> ordinal(1)
        'st'
        >>> ordinal(-1021)
        'st'
    """
    number = int(number)
    return {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
'''


def test_a_docstring_shows_its_examples_and_hides_its_prose() -> None:
    function = Function("num.py", "ordinal", 1, 13)
    shown = numbered(ORDINAL, 1, 13, hidden=docstring_body(ORDINAL, function))
    assert ">>> ordinal(-1021)" in shown and "'st'" in shown
    assert "The suffix that denotes" not in shown and "(docstring, lines 3-6)" in shown
    assert "number = int(number)" in shown


def test_a_docstring_without_examples_is_hidden_whole() -> None:
    source = ORDINAL.replace(">>> ", "")
    shown = numbered(source, 1, 13, hidden=docstring_body(source, Function("n.py", "o", 1, 13)))
    assert "ordinal(-1021)" not in shown and "(docstring, lines 3-10)" in shown


NESTED_TOO_DEEP = {
    "shapes/generated.py": "PARTS = " + "'a' + " * 6000 + "'b'\n",  # a generated table
    "shapes/negated.py": "Y = " + "-" * 100000 + "1\n",
}
"""Python files `ast` cannot build a tree of (RecursionError, MemoryError), as CPython's
own compiler cannot either: a file nothing imports, in a project solve is given."""


def test_a_file_nested_too_deep_to_parse_is_passed_over_not_a_crash(tmp_path: Path) -> None:
    from mulligan.solve.cold import statements
    from mulligan.solve.edits import syntax_problem

    root = make_shapes(tmp_path)
    for path, source in NESTED_TOO_DEEP.items():
        (root / path).write_text(source)
        assert syntax_problem(path, source) is not None  # an edit leaving it so is refused
        assert statements(source) == ({}, {})
    code = Code(root, ["shapes/area.py", *NESTED_TOO_DEEP])
    assert [f.name for f in code.functions["shapes/area.py"]] == ["square", "rect"]
    assert all(code.functions[path] == [] for path in NESTED_TOO_DEEP)


@pytest.mark.timeout(30)
def test_a_fifo_named_like_python_is_not_read(tmp_path: Path) -> None:
    """Opening a FIFO waits for a writer that never comes: solve hung before any model call
    on a project with one named `*.py` (or a link to one)."""
    import os

    root = make_shapes(tmp_path)
    os.mkfifo(root / "shapes" / "pipe.py")
    (root / "shapes" / "link.py").symlink_to("pipe.py")
    code = Code(root, ["shapes/area.py", "shapes/pipe.py", "shapes/link.py"])
    assert list(code.sources) == ["shapes/area.py"]


def test_a_python_file_too_large_for_a_diff_is_not_read(tmp_path: Path) -> None:
    """A generated module of megabytes: an edit to it could not be applied (a diff shows a
    file that large as binary), so it is not read, parsed or shown."""
    from mulligan.solve.diffs import MAX_DIFF_BYTES

    root = make_shapes(tmp_path)
    table = "".join(f"def f{n}():\n    return {n}\n" for n in range(MAX_DIFF_BYTES // 20))
    (root / "shapes" / "table.py").write_text(table)
    code = Code(root, ["shapes/area.py", "shapes/table.py"])
    assert list(code.sources) == ["shapes/area.py"]
