"""Every flag of `run`, `bench` and `solve`, read from the argparse parser itself: changed on
--resume, it is refused naming that flag, unless it is one of the few documented settings that
cannot change a result (where the model is reached, how long a reply is waited for, where the
memory is, concurrency, output format and place, the executor)."""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import build_parser
from mulligan.cli.bench import plan_bench
from mulligan.cli.flag_checks import check_flags
from mulligan.cli.help_format import commands_of
from mulligan.cli.pipeline import run_manifest
from mulligan.cli.run import plan_run
from mulligan.cli.solve import plan_solve
from mulligan.errors import UserError
from mulligan.runs.lifecycle import NOT_RECORDED, RESUME_MAY_CHANGE, check_resume
from mulligan.settings.fields import flag_of

TASKS = "".join(
    f"- id: t{n}\n  prompt: Say {n}.\n  checks:\n    - {{type: exact_match, answer: '{n}'}}\n"
    for n in range(4)
)
ENDPOINT = ["--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--embedding", "hash"]
UNCOMPARED = set(NOT_RECORDED) | {str(flag_of(path)) for path in RESUME_MAY_CHANGE} | {"help"}


def baselines(tmp: Path) -> dict[str, list[str]]:
    suite = tmp / "tasks.yaml"
    suite.write_text(TASKS)
    for name in ("train", "train2", "other"):
        (tmp / f"{name}.yaml").write_text(TASKS.replace("id: t", f"id: {name}"))
    train = tmp / "train.yaml"
    (tmp / "project").mkdir()
    return {
        "run": ["run", str(suite), "--strategy", "reflexion", *ENDPOINT],
        "bench": ["bench", str(suite), "--strategies", "react,reflexion", *ENDPOINT],
        "bench --learn-on": [
            "bench", str(suite), "--learn-on", str(train), "--strategies",
            "react,memory-frozen", *ENDPOINT,
        ],
        "solve": ["solve", "fix it", "--check", "true", "--dir", str(tmp / "project"), *ENDPOINT],
    }  # fmt: skip


def manifest_of(argv: list[str]) -> dict[str, Any]:
    """The manifest the command would start its run with (nothing is connected or opened)."""
    return json.loads(_manifest_of(tuple(argv)))


@functools.lru_cache(maxsize=512)
def _manifest_of(argv: tuple[str, ...]) -> str:
    args = build_parser().parse_args(list(argv))
    check_flags(args)
    if args.command == "run":
        config, _, request = plan_run(args)
    elif args.command == "bench":
        config, _, _, request = plan_bench(args)
    else:
        config, _, _, request = plan_solve(args)
    return json.dumps(run_manifest(config, request))


def changed(action: argparse.Action, base: list[str], tmp: Path) -> list[str]:
    """The argv that sets this flag to another value than the baseline has."""
    flag = str(action.option_strings[-1]) if action.option_strings else None
    now = getattr(build_parser().parse_args(base), action.dest)
    if action.nargs == 0:
        return [flag] if flag else []
    if action.choices:  # a choice whose manifest is not the baseline's (a default resolved)
        before = manifest_of(base)
        for other in [c for c in action.choices if c != now]:
            argv = replaced(base, action, [str(flag), str(other)])
            if not same_manifest(argv, before):  # refused outright counts as different
                return [str(flag), str(other)]
        return [str(flag), str(other)]
    special = {
        "ids": "t1,t2", "limit": "2", "sample": "2", "data": str(tmp / "tasks.yaml"),
        "base_url": "http://127.0.0.1:10/v1", "model": "other", "embedding": "hash:64",
        "memory": str(tmp / "elsewhere"), "mcp": "python server.py", "check": "false",
        "dir": str(tmp), "first_from": "another-run", "learn_on": str(tmp / "train2.yaml"),
        "tools": "calculator", "family": "other", "strategy": "retry",
        "strategies": "react,retry" if "--learn-on" not in base else "reflexion,memory-frozen", "suite": str(tmp / "other.yaml"), "task": "fix that",
        "api_key": "sk-other", "prices_file": str(tmp / "prices.json"), "out": str(tmp / "o"),
        "ray_address": "127.0.0.1:1", "resume": "r2",
        "temperature": "0.3", "min_similarity": "0.5", "merge_similarity": "0.5",
    }  # fmt: skip
    if action.dest in special:
        value = special[action.dest]
    elif action.type is float or "float" in str(action.type):
        value = "0.37" if now is None else str(now / 2)  # no default is 0.37
    else:
        value = "7" if now is None else str(now + 1)  # nor 7
    return [flag, value] if flag else [value]


def same_manifest(argv: list[str], before: dict[str, Any]) -> bool:
    try:
        return manifest_of(argv) == before
    except UserError:  # refused outright (naming the flag): not the same run either
        return False


def replaced(argv: list[str], action: argparse.Action, new: list[str]) -> list[str]:
    """`argv` with this flag's value (or positional) replaced by `new`."""
    if not action.option_strings:
        positions = [i for i, a in enumerate(argv) if a == argv[1]]  # the one positional
        return [argv[0], new[0], *argv[positions[0] + 1 :]]
    out, skip = [], False
    for item in argv:
        if skip:
            skip = False
            continue
        if item in action.option_strings:
            skip = action.nargs != 0
            continue
        out.append(item)
    return out + new


def flags_of(command: str) -> list[argparse.Action]:
    parser = commands_of(build_parser())[command]
    return [a for a in parser._actions if a.dest not in ("help",)]


@pytest.mark.parametrize("kind", ["run", "bench", "bench --learn-on", "solve"])
def test_every_flag_changed_on_resume_is_refused_naming_it(kind: str, tmp_path: Path) -> None:
    (tmp_path / "prices.json").write_text("{}")
    base = baselines(tmp_path)[kind]
    before = manifest_of(base)
    run = {"manifest": json.dumps(before)}
    check_resume(run, "r1", before, "log")  # the same flags: it continues
    refused, uncompared, already = [], [], []
    for action in flags_of(base[0]):
        if action.dest in UNCOMPARED:
            uncompared.append(action.dest)
            continue
        argv = replaced(base, action, changed(action, base, tmp_path))
        if action.nargs == 0 and same_manifest(argv, before):
            already.append(action.dest)  # an on-flag the command's own default already sets
            continue
        named = action.option_strings[-1] if action.option_strings else action.dest
        with pytest.raises(UserError) as caught:
            check_resume(run, "r1", manifest_of(argv), "log")
        message = str(caught.value)
        assert named in message or named.strip("-").replace("-", "_") in message, (named, message)
        refused.append(action.dest)
    assert len(refused) > 20 if kind != "solve" else len(refused) > 15
    assert set(uncompared) <= UNCOMPARED
    assert already == []  # no command turns an on-flag on by itself (solve shows what run does)


def test_what_a_resume_may_change_is_a_short_documented_list() -> None:
    every = {a.dest for command in ("run", "bench", "solve") for a in flags_of(command)}
    assert UNCOMPARED - {"help"} <= every
    assert len(UNCOMPARED - {"help"}) <= 18
    assert all(why.strip() for why in [*NOT_RECORDED.values(), *RESUME_MAY_CHANGE.values()])


def test_a_run_recorded_before_hotpotqas_feedback_setting_resumes(tmp_path: Path) -> None:
    """`--feedback` says how hotpotqa's answer check is shown; other suites do not record it,
    so a run whose manifest predates the flag resumes with the same arguments."""
    argv = baselines(tmp_path)["bench"]
    now = manifest_of(argv)
    older = {k: v for k, v in now.items() if k != "feedback"}
    check_resume({"manifest": json.dumps(older)}, "r1", now, "log")


def test_feedback_with_a_suite_other_than_hotpotqa_is_refused(tmp_path: Path) -> None:
    argv = [*baselines(tmp_path)["bench"], "--feedback", "hidden"]
    with pytest.raises(UserError, match="--feedback.*hotpotqa"):
        manifest_of(argv)
