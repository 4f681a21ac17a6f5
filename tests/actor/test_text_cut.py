"""The one place long text is cut: the cut is always marked and never silent."""

from mulligan.text_cut import head, head_and_tail, last_lines


def test_head_keeps_short_text_and_marks_a_cut() -> None:
    assert head("  short  ", 50) == "short"
    cut = head("x" * 100, 50)
    assert len(cut) <= 50 and cut.endswith("[... 50 cut]")


def test_head_and_tail_keeps_both_ends() -> None:
    text = "HEAD" + "m" * 1000 + "TAIL"
    cut = head_and_tail(text, 300)
    assert cut.startswith("HEAD") and cut.endswith("TAIL")
    assert "[... 708 characters cut ...]" in cut
    assert head_and_tail("small", 300) == "small"


def test_last_lines_marks_how_many_were_cut() -> None:
    text = "\n".join(f"line {n}" for n in range(10))
    assert last_lines(text, 3) == ["line 7", "line 8", "line 9"]
    assert last_lines(text, 3, mark=True) == ["[... 7 lines cut]", "line 7", "line 8", "line 9"]
    assert last_lines(text, 20, mark=True) == [f"line {n}" for n in range(10)]
    assert last_lines(text, 0) == []
