"""An edit the failing test cannot feel (it changes only lines the test never ran, in a function
it called) is refused before the checks, naming the lines that did run; anything the trace
does not prove, it lets through."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mulligan.solve.cold import cold_edit
from mulligan.solve.localise import Function
from tests.helpers.solving import solve
from tests.solve.projects import make_shapes, prompts_sent, replying

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
DESCRIBE = (
    "def describe(count):\n"  # 1
    "    if count == 1:\n"  # 2
    '        return "one item"\n'  # 3
    '    label = f"{count} item"\n'  # 4
    "    return (\n"  # 5
    "        label\n"  # 6
    "    )\n"  # 7
    "\n"  # 8
    "\n"  # 9
    "def helper(x):\n"  # 10
    "    def inner(y):\n"  # 11
    "        return y\n"  # 12
    "    return inner(x)\n"  # 13
)
"""describe(2) gives '2 item': line 4 has the bug; line 3 runs only for one."""
DESCRIBE_F = Function("shapes/area.py", "describe", 1, 7)
HELPER_F = Function("shapes/area.py", "helper", 10, 13)


def edited(old: str, new: str) -> dict[str, str]:
    return {"shapes/area.py": DESCRIBE.replace(old, new, 1)}


def refusal(ran: dict[Function, set[int]], texts: dict[str, str]) -> str | None:
    return cold_edit(ran, {"shapes/area.py": DESCRIBE}.get, texts)


def test_an_edit_of_lines_that_never_ran_is_refused_naming_those_that_did() -> None:
    said = refusal({DESCRIBE_F: {1, 2, 4, 5, 6}}, edited('"one item"', '"one items"'))
    assert said is not None and "never ran" in said
    assert "`describe` (lines 3 of shapes/area.py); it ran lines 1-2, 4-6" in said


@pytest.mark.parametrize(
    ("ran", "old", "new"),
    [
        ({DESCRIBE_F: {1, 2, 4, 5}}, '} item"', '} items"'),  # line 4 ran
        ({DESCRIBE_F: {1, 2, 4, 5}}, "        label\n", "        label + 's'\n"),  # in line 5's
        ({DESCRIBE_F: {1, 2, 4, 5}}, "def describe(count):", "def describe(count=2):"),
        ({DESCRIBE_F: {1, 2, 4, 5}}, "    label = ", "    count += 0\n    label = "),  # beside 4
        ({HELPER_F: {10, 11, 13}}, "        return y\n", "        return y + 1\n"),  # nested
        ({}, '"one item"', '"one items"'),  # describe not traced in full
    ],
)
def test_what_the_trace_does_not_prove_unrun_is_let_through(
    ran: dict[Function, set[int]], old: str, new: str
) -> None:
    assert refusal(ran, edited(old, new)) is None


def test_solve_refuses_an_edit_of_the_branch_that_never_ran_and_asks_again(
    tmp_path: Path,
) -> None:
    project = make_shapes(tmp_path / "p", DESCRIBE)
    (project / "tests" / "test_area.py").write_text(
        "from shapes.area import describe\n\n\n"
        "def test_describe():\n    assert describe(2) == '2 items'\n"
    )
    wrong = 'shapes/area.py\n<<<<<<< SEARCH\n        return "one item"\n=======\n        return "one items"\n>>>>>>> REPLACE\n'  # noqa: E501
    right = 'shapes/area.py\n<<<<<<< SEARCH\n    label = f"{count} item"\n=======\n    label = f"{count} items"\n>>>>>>> REPLACE\n'  # noqa: E501
    code, server = solve(tmp_path, project, replying(wrong, right), check=PYTEST)
    assert code == 0
    again = prompts_sent(server.requests)[1]
    assert "never ran the lines this edit changes" in again and "`describe` (lines 3 of" in again


def test_lines_a_fixture_ran_count_as_run(tmp_path: Path) -> None:
    """The test itself calls describe(2) only; its fixture called describe(1), whose branch
    has the bug: an edit there is checked, not refused."""
    buggy = DESCRIBE.replace('return "one item"', 'return "one"')
    project = make_shapes(tmp_path / "p", buggy)
    (project / "tests" / "test_area.py").write_text(
        "import pytest\n\nfrom shapes.area import describe\n\n\n"
        "@pytest.fixture\ndef single():\n    return describe(1)\n\n\n"
        "def test_describe(single):\n    assert describe(2) == '2 item'\n"
        "    assert single == 'one item'\n"
    )
    right = 'shapes/area.py\n<<<<<<< SEARCH\n        return "one"\n=======\n        return "one item"\n>>>>>>> REPLACE\n'  # noqa: E501
    code, server = solve(tmp_path, project, replying(right), check=PYTEST)
    assert code == 0
    assert len(prompts_sent(server.requests)) == 1
