"""`mulligan solve` with the repair pipeline, end to end on a scripted endpoint: it says which
strategy it chose in its first lines; a refused edit (no match, broken syntax) is answered
with the reason and costs no check run; selection keeps the candidate the checks pass (the
smallest of several); `--apply` writes exactly the passing change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mulligan.solve.copies import ChangeRecordingEvaluator
from mulligan.solve.diffs import unified_diff
from tests.helpers.solving import files_of, one_line_error, passes_in, solve
from tests.solve.projects import (
    AREA,
    CHECK,
    RIGHT,
    WORDY,
    WRONG,
    block,
    make_shapes,
    prompts_sent,
    reflecting,
    replying,
)
from tests.solve.test_solve import make_project

FIXED = AREA.replace("width + height", "width * height")


@pytest.fixture
def check_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The trial of every attempt whose checks were run, in order."""
    runs: list[int] = []
    real = ChangeRecordingEvaluator.evaluate

    def counted(self: ChangeRecordingEvaluator, task: Any, attempt: Any, *rest: Any) -> Any:
        runs.append(attempt.trial)
        return real(self, task, attempt, *rest)

    monkeypatch.setattr(ChangeRecordingEvaluator, "evaluate", counted)
    return runs


def test_the_first_lines_name_the_strategy_chosen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_shapes(tmp_path / "shapes")
    code, _ = solve(tmp_path, project, replying(RIGHT), check=CHECK)
    err = capsys.readouterr().err.splitlines()
    assert code == 0
    assert err[0] == "before any change: 1 of 1 check(s) fail"
    assert err[1].startswith("strategy: patch (the repair pipeline; chosen: ")
    assert "localised by what the failing test calls: shapes/area.py:rect" in err[1]


def test_a_failure_naming_no_function_goes_to_the_agent_loop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")  # its asserts are at the test module's top level
    solve(tmp_path, project, replying("Done."))
    err = capsys.readouterr().err.splitlines()
    assert err[1].startswith("strategy: reflexion-memory (the agent loop; chosen: ")


def test_a_block_that_does_not_match_is_refused_and_costs_no_check_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], check_runs: list[int]
) -> None:
    project = make_shapes(tmp_path / "shapes")
    typo = block("    return width + heigth", "    return width * height")
    code, server = solve(tmp_path, project, replying(typo, RIGHT), check=CHECK)
    assert code == 0, capsys.readouterr().err
    assert check_runs == [1]  # one attempt, its checks run once: on the edit that applied
    told = prompts_sent(server.requests)[1]
    assert "refused" in told and "'    return width + heigth'" in told and "lines 6-6" in told
    assert capsys.readouterr().out == unified_diff({"shapes/area.py": AREA.encode()},
                                                   {"shapes/area.py": FIXED.encode()})  # fmt: skip


def test_a_refused_edit_is_asked_again_in_a_fresh_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 1.5B model, shown its refused reply as its own turn, wrote it again word for word;
    asked again, it gets the first prompt and the reason, not its own reply to copy."""
    project = make_shapes(tmp_path / "shapes")
    typo = block("    return width + heigth", "    return width * height")
    code, server = solve(tmp_path, project, replying(typo, RIGHT), check=CHECK)
    assert code == 0, capsys.readouterr().err
    first, again = [b["messages"] for b in server.requests if not reflecting(b)][:2]
    assert [m["role"] for m in again] == ["user"]
    assert again[0]["content"].startswith(first[0]["content"])
    assert "heigth" not in first[0]["content"]
    assert "'    return width + heigth'" in again[0]["content"]


def test_a_candidate_that_breaks_the_syntax_is_refused_before_the_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], check_runs: list[int]
) -> None:
    project = make_shapes(tmp_path / "shapes")
    broken = block("    return width + height", "    return (width * height")
    code, server = solve(tmp_path, project, replying(broken), "--trials", "2", check=CHECK)
    err = capsys.readouterr().err
    assert code == 1, err
    assert check_runs == []  # two candidates, each asked twice: no check ever ran
    assert len(prompts_sent(server.requests)) == 4
    assert "does not parse" in prompts_sent(server.requests)[1]
    assert "no attempt passed" in err


def test_selection_keeps_the_candidate_the_checks_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], check_runs: list[int]
) -> None:
    project = make_shapes(tmp_path / "shapes")
    argv = ("--trials", "2", "--concurrency", "2")
    code, _ = solve(tmp_path, project, replying(WRONG, RIGHT), *argv, check=CHECK)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert sorted(check_runs) == [1, 2]
    assert "+    return width * height" in captured.out and "width - height" not in captured.out


def test_of_two_passing_candidates_the_smaller_change_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_shapes(tmp_path / "shapes")
    argv = ("--trials", "2", "--concurrency", "2")
    code, _ = solve(tmp_path, project, replying(WORDY, RIGHT), *argv, check=CHECK)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "# the area" not in captured.out and "+    return width * height" in captured.out


def test_a_failed_round_is_feedback_to_the_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_shapes(tmp_path / "shapes")
    code, server = solve(tmp_path, project, replying(WRONG, RIGHT), "--trials", "2", check=CHECK)
    assert code == 0, capsys.readouterr().err
    second = prompts_sent(server.requests)[-1]
    assert "did not work" in second and "+    return width - height" in second


def test_an_edit_already_checked_is_refused_and_costs_no_check_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], check_runs: list[int]
) -> None:
    """The checks are deterministic: a candidate whose edit is one an earlier candidate's
    checks already failed is asked for a different one instead of being checked again."""
    project = make_shapes(tmp_path / "shapes")
    replies = replying(WRONG, WRONG, RIGHT)
    code, server = solve(tmp_path, project, replies, "--trials", "2", check=CHECK)
    assert code == 0, capsys.readouterr().err
    assert check_runs == [1, 2]  # the repeat of attempt 1's edit was never checked
    told = prompts_sent(server.requests)[2]
    assert "the same change as attempt 1" in told and "make a different edit" in told


def test_apply_writes_exactly_the_passing_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_shapes(tmp_path / "shapes")
    before = files_of(project)
    argv = ("--trials", "2", "--concurrency", "2", "--apply")
    code, _ = solve(tmp_path, project, replying(WRONG, RIGHT), *argv, check=CHECK)
    assert code == 0, capsys.readouterr().err
    assert files_of(project) == {**before, "shapes/area.py": FIXED.encode()}
    assert passes_in(project, CHECK)


def test_strategy_patch_on_a_failure_naming_no_function_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path / "calc")
    code, server = solve(tmp_path, project, replying("Done."), "--strategy", "patch")
    assert code == 2 and not prompts_sent(server.requests)
    line = one_line_error(capsys.readouterr().err.split("check(s) fail\n", 1)[-1])
    assert "--strategy patch" in line and "--strategy reflexion-memory" in line


def test_the_loop_refuses_the_pipeline_strategy() -> None:
    from mulligan.errors import UserError
    from mulligan.loop import LoopSettings

    with pytest.raises(UserError, match="only under `mulligan solve`"):
        LoopSettings(strategy="patch")


@pytest.mark.parametrize(("strategy", "sent"), [("patch[diverse]", [0.2, 1.0]),
                                                ("patch", [0.7, 0.7])])  # fmt: skip
def test_diverse_candidates_are_drawn_across_the_temperature_ladder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: str, sent: list[float]
) -> None:
    project = make_shapes(tmp_path / "shapes")
    argv = ("--trials", "2", "--strategy", strategy, "--temperatures", "0.2,1.0")
    code, server = solve(tmp_path, project, replying(WRONG, RIGHT), *argv, check=CHECK)
    assert code == 0, capsys.readouterr().err
    assert [b["temperature"] for b in server.requests if not reflecting(b)] == sent
