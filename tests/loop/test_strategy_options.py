"""A strategy takes options in brackets instead of a name per combination: what a memory arm
reads, which faithfulness twin, from which trial. The names of before still read."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from mulligan import strategies
from mulligan.errors import UserError
from mulligan.memory import HashEmbedding, Memory
from mulligan.report.report import write_report
from tests.helpers.arms import every_arm
from tests.helpers.logged_runs import log_run
from tests.helpers.verdicts import seen


def test_options_set_what_the_arm_reads_its_twin_and_its_first_trial() -> None:
    arm = strategies.get("memory-frozen[cases,shuffled]")
    assert (arm.items, arm.twin, arm.reads_from_trial) == ("cases", "shuffled", 1)
    later = strategies.get("memory-frozen[both,on-retry]")
    assert (later.items, later.twin, later.reads_from_trial) == ("both", None, 2)
    assert later.shares_first_attempt and not arm.shares_first_attempt


def test_the_options_name_the_arm_in_one_order_whatever_order_they_were_given() -> None:
    assert strategies.get("memory-frozen[on-retry, cases]").name == "memory-frozen[cases,on-retry]"
    assert strategies.get("memory-frozen[]").name == "memory-frozen"


@pytest.mark.parametrize(
    ("old", "words"),
    [
        ("memory-frozen-cases", "cases"),
        ("memory-frozen-shuffled", "shuffled"),
        ("memory-frozen-both-corrupted", "both,corrupted"),
        ("memory-frozen-cases-on-retry", "cases,on-retry"),
        ("memory-frozen-on-retry", "on-retry"),
    ],
)
def test_a_name_of_before_is_the_same_arm_under_its_old_name(old: str, words: str) -> None:
    """A logged run names its strategies so: its episode ids keep the old name."""
    legacy, new = strategies.get(old), strategies.get(f"memory-frozen[{words}]")
    assert legacy.name == old
    assert replace(legacy, name=new.name, summary=new.summary) == new


def test_commas_inside_brackets_belong_to_the_arm() -> None:
    names = [s.name for s in strategies.parse("react,memory-frozen[cases,shuffled],retry")]
    assert names == ["react", "memory-frozen[cases,shuffled]", "retry"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("memory-frozen[cases,both]", "one items option at most"),
        ("memory-frozen[corrupted,cases]", "corrupted cannot go with cases"),
        ("memory-frozen[sideways]", "takes no option 'sideways'"),
        ("react[cases]", "react takes no option 'cases' (it takes: none)"),
        ("memory-frozen-sideways", "unknown strategy 'memory-frozen-sideways'"),
        ("memory-frozen-cases-cases", "unknown strategy 'memory-frozen-cases-cases'"),
        ("memory-frozen-shuffled-cases", "unknown strategy 'memory-frozen-shuffled-cases'"),
    ],
)
def test_a_bad_option_is_one_clear_line_naming_the_flag(text: str, said: str) -> None:
    with pytest.raises(UserError) as caught:
        strategies.parse(text)
    assert str(caught.value).startswith("--strategies: ") and said in str(caught.value)


def test_every_arm_is_named_by_options_and_none_by_a_name_of_its_own() -> None:
    arms = every_arm()
    frozen = [arm for arm in arms if arm.name.startswith("memory-frozen")]
    # 3 item choices x 4 twin choices x 2 first trials, but cases cannot be corrupted
    assert len(frozen) == 3 * 4 * 2 - 2
    assert all(name in strategies.REGISTRY for name in strategies.NAMES)
    assert not any("memory-frozen-" in name for name in strategies.NAMES)


@pytest.mark.parametrize(
    ("text", "twice"),
    [
        ("retry,react,retry", "retry"),
        ("memory-frozen[cases,cases],memory-frozen[cases]", "memory-frozen[cases]"),
        ("memory-frozen-cases,memory-frozen[cases]", "memory-frozen[cases]"),
    ],
)
def test_the_same_arm_twice_is_refused_naming_it(text: str, twice: str) -> None:
    """Its episodes would share ids: the second arm would only count the first one's again."""
    with pytest.raises(UserError) as caught:
        strategies.parse(text)
    said = str(caught.value)
    assert said.startswith("--strategies: ") and f"{twice!r}" in said and "twice" in said


def test_a_command_of_one_strategy_refuses_a_list_of_them() -> None:
    with pytest.raises(UserError, match=r"^--strategy: one strategy.*'retry', 'react'"):
        strategies.for_solve("retry,react")
    assert strategies.for_solve("memory-frozen[cases,shuffled]") is not None


def test_a_log_naming_an_option_this_version_lacks_still_reports(tmp_path: Path) -> None:
    """A newer version's arm (`select[sideways]`) reads as an unknown strategy, as a newer
    strategy's name does: the report is written, not refused as if the user had typed it."""
    memory = Memory(tmp_path / "mem", HashEmbedding())
    arms = ["react", "select[sideways]"]
    config = {"strategies": arms, "task_order": ["a"], "seed": 0,
              "config": {"loop": {"trials": 1, "stop": "honest"}}}  # fmt: skip
    log_run(memory.log, "newer", config, {arm: {"a": [seen(True)]} for arm in arms})
    stats = write_report(memory.log, "newer", tmp_path / "out")
    assert [s.label for s in stats.strategies] == arms
    assert strategies.known("select[sideways]") is None
