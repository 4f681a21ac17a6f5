"""Search/replace edits as a model writes them: applied when their SEARCH lines are in the
file once (copied line numbers and another indentation tolerated), refused with a reason
otherwise: the lines that differ and the closest match, a file that would not parse, a test
edited, nothing changed."""

from __future__ import annotations

import pytest

from mulligan.solve.edits import Refused, parse_blocks, planned
from tests.solve.projects import AREA, RIGHT, TESTS, block

FILES = {"shapes/area.py": AREA, "tests/test_area.py": TESTS}
SHOWN = {"shapes/area.py": set(range(1, 7))}


def apply(reply: str) -> dict[str, str]:
    return planned(parse_blocks(reply), FILES.get, SHOWN).texts


def refusal(reply: str) -> str:
    with pytest.raises(Refused) as refused:
        apply(reply)
    return str(refused.value)


def test_a_matching_block_changes_exactly_its_lines() -> None:
    changed = apply("Here is the fix:\n\n" + RIGHT)
    assert changed == {"shapes/area.py": AREA.replace("width + height", "width * height")}


def test_copied_line_numbers_and_another_indentation_are_tolerated() -> None:
    numbered = block(" 6 |     return width + height", " 6 |     return width * height")
    expected = {"shapes/area.py": AREA.replace("width + height", "width * height")}
    assert apply(numbered) == expected
    assert apply(block("return width + height", "return width * height")) == expected
    assert apply(block("width + height", "width * height")) == expected  # part of a line


def test_a_file_with_crlf_line_ends_keeps_them_where_the_block_changes_it() -> None:
    crlf = AREA.replace("\n", "\r\n")
    wordy = block(
        "def rect(width, height):\n    return width + height",
        "def rect(width, height):\n    area = width * height\n    return area",
    )
    changed = planned(parse_blocks(wordy), {"shapes/area.py": crlf}.get, SHOWN).texts
    assert changed == {
        "shapes/area.py": crlf.replace(
            "return width + height", "area = width * height\r\n    return area"
        )
    }


def test_a_line_copied_from_the_trace_is_tolerated() -> None:
    """The trace shows a line as `   6 | return width + height    -> total = 7`; the 1.5B model
    copied such lines, values and all, into its SEARCH part."""
    traced = block("   6 | return width + height    -> total = 7", "   6 | return width * height")
    expected = {"shapes/area.py": AREA.replace("width + height", "width * height")}
    assert apply(traced) == expected
    assert (
        apply(block("return width + height    -> total = 7", "return width * height")) == expected
    )


def test_lines_wrapped_in_the_forms_parentheses_are_read_without_them() -> None:
    """The prompt's form once read `(the line to change, ...)`; the 1.5B model wrapped its
    own lines the same way, `(return width + height)`, and the edit was refused."""
    expected = {"shapes/area.py": AREA.replace("width + height", "width * height")}
    assert apply(block("(    return width + height)", "(    return width * height)")) == expected
    assert apply(block("(return width + height)", "(return width * height)")) == expected


def test_lines_quoted_as_a_refusal_quotes_them_are_read_without_the_quotes() -> None:
    """A refusal names the file's lines as `'    return width + height'`; the 1.5B model
    wrote its next SEARCH and REPLACE lines quoted the same way."""
    expected = {"shapes/area.py": AREA.replace("width + height", "width * height")}
    assert apply(block("'    return width + height'", "'    return width * height'")) == expected
    assert apply(block('"return width + height"', '"return width * height"')) == expected


def test_a_block_that_matches_twice_applies_where_the_model_was_shown() -> None:
    twice = AREA + "\n\ndef other(width, height):\n    return width + height\n"
    files = {"shapes/area.py": twice}
    for reply in (RIGHT, block("width + height", "width * height")):
        plan = planned(parse_blocks(reply), files.get, {"shapes/area.py": {8, 9, 10, 11}})
        assert plan.texts["shapes/area.py"] == AREA + twice[len(AREA) :].replace("+", "*")


def test_a_block_indented_otherwise_that_matches_twice_is_reindented_where_shown() -> None:
    """`return width + height` without its indentation matches two lines; the one shown is
    changed, with the file's indentation (it was once put in unindented, and refused as a
    file that does not parse)."""
    twice = AREA + "\n\ndef other(width, height):\n    return width + height\n"
    plan = planned(
        parse_blocks(block("return width + height", "return width * height")),
        {"shapes/area.py": twice}.get,
        {"shapes/area.py": {8, 9, 10, 11}},
    )
    assert plan.texts["shapes/area.py"] == AREA + twice[len(AREA) :].replace("+", "*")


@pytest.mark.parametrize(
    "divided",
    [
        "SEARCH\n{old}\n>>>>>>> REPLACE\n=======\n{new}\n",  # the markers swapped
        "SEARCH\n{old}\n>>>>>>> REPLACE\n{new}\n",  # REPLACE as the divider, no end
        "SEARCH\n{old}\n=======\n{new}\n",  # no end marker
    ],
)
def test_a_block_with_its_markers_out_of_order_or_missing_is_read(divided: str) -> None:
    """The 1.5B model wrote all three (toolz, isodate); a block with no divider at all
    stays refused."""
    old, new = "    return width + height", "    return width * height"
    reply = "shapes/area.py\n<<<<<<< " + divided.format(old=old, new=new)
    assert apply(reply) == {"shapes/area.py": AREA.replace("width + height", "width * height")}
    assert "no SEARCH/REPLACE block" in refusal(f"shapes/area.py\n<<<<<<< SEARCH\n{old}\n")


def test_a_block_without_a_usable_path_is_looked_for_in_the_shown_files() -> None:
    reply = block("    return width + height", "    return width * height", path="area.py")
    assert list(apply(reply)) == ["shapes/area.py"]


def test_a_block_naming_another_project_file_applies_in_the_shown_file_holding_its_lines() -> None:
    """The 1.5B model named a sibling module (`_deprecated.py` for `version.py`)."""
    files = {**FILES, "shapes/legacy.py": "def old():\n    return 0\n"}
    reply = block("    return width + height", "    return width * height", "shapes/legacy.py")
    plan = planned(parse_blocks(reply), files.get, SHOWN)
    assert plan.texts == {"shapes/area.py": AREA.replace("width + height", "width * height")}


DOCUMENTED = (
    "def rect(width, height):\n"
    '    """The area.\n'
    "\n"
    "    Width times height.\n"
    '    """\n'
    "    return width + height\n"
)


def test_the_shown_docstring_mark_copied_into_a_block_stands_for_the_lines_it_hides() -> None:
    """Code is shown with a docstring's prose as `    | ... (docstring, lines 3-4)`; the
    model copied that line into SEARCH and REPLACE."""
    files, shown = {"shapes/area.py": DOCUMENTED}, {"shapes/area.py": set(range(1, 7))}
    for mark in ("    ... (docstring, lines 3-4)", "  | ... (docstring, lines 3-4)"):
        search = f'def rect(width, height):\n    """The area.\n{mark}\n    """\n    return width + height'
        reply = block(search, search.replace("+", "*"))
        plan = planned(parse_blocks(reply), files.get, shown)
        assert plan.texts == {"shapes/area.py": DOCUMENTED.replace("+", "*")}


def test_the_docstring_mark_in_the_replace_part_alone_is_not_read_as_lines() -> None:
    """Only a mark the SEARCH part has too stands for the docstring's lines in REPLACE; alone
    it would put them in twice."""
    files, shown = {"shapes/area.py": DOCUMENTED}, {"shapes/area.py": set(range(1, 7))}
    reply = block("    return width + height", "    ... (docstring, lines 2-5)\n    return 0")
    with pytest.raises(Refused, match="does not parse"):
        planned(parse_blocks(reply), files.get, shown)


def test_a_block_that_does_not_match_names_the_lines_that_differ() -> None:
    said = refusal(block("    return width + heigth", "    return width * height"))
    assert "not in the file" in said and "closest are lines 6-6" in said
    assert "'    return width + heigth'" in said and "'    return width + height'" in said


def test_a_block_that_matches_twice_is_refused() -> None:
    said = refusal(block("", "x") + block("\n", "y"))
    assert "SEARCH part is empty" in said
    twice = {"shapes/area.py": AREA + "\n\ndef other(width, height):\n    return width + height\n"}
    with pytest.raises(Refused, match="occur 2 times"):
        planned(parse_blocks(RIGHT), twice.get, {"shapes/area.py": set(range(1, 12))})


def test_of_several_blocks_those_that_apply_do_and_the_others_are_said() -> None:
    test_edit = block("    assert rect(2, 5) == 10, rect(2, 5)", "    pass", "tests/test_area.py")
    plan = planned(parse_blocks(test_edit + RIGHT), FILES.get, SHOWN)
    assert plan.texts == {"shapes/area.py": AREA.replace("width + height", "width * height")}
    assert len(plan.skipped) == 1 and "is a test" in plan.skipped[0]


def test_an_edit_that_breaks_the_syntax_is_refused_naming_the_line() -> None:
    said = refusal(block("    return width + height", "    return (width * height"))
    assert "does not parse" in said and "line 6" in said


def test_edits_to_tests_and_edits_that_change_nothing_are_refused() -> None:
    test_edit = block("    assert rect(2, 5) == 10, rect(2, 5)", "    pass", "tests/test_area.py")
    assert "is a test" in refusal(test_edit)
    assert "changes nothing" in refusal(
        block("    return width + height", "    return width + height")
    )
    assert "no SEARCH/REPLACE block" in refusal("The bug is in rect: use * instead of +.")
