"""Helpers for the tests that attack `mulligan solve` as a demanding user would: a scripted
endpoint that makes given tool calls, `solve` run in this process, and what a directory holds.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.testing import FakeOpenAIServer, FakeReply
from tests.solve.test_solve import CHECK, FIXED, call, solve_args

Calls = list[dict[str, Any]]


def reflecting(body: dict[str, Any]) -> bool:
    """The request is the reflector's, not the actor's."""
    opening = str(body["messages"][0]["content"])
    return "You review a failed attempt" in opening or opening.startswith("An agent failed")


NO_LESSON = json.dumps({"diagnosis": "", "lesson": "", "tags": []})


def turn_of(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def scripted(*turns: Calls) -> Callable[[dict[str, Any]], FakeReply]:
    """The actor makes these tool calls, one batch per turn, then says it is done; the
    reflector answers with an empty lesson."""

    def policy(body: dict[str, Any]) -> FakeReply:
        if reflecting(body):
            return FakeReply(content=NO_LESSON)
        turn = turn_of(body)
        if turn < len(turns):
            return FakeReply(content=None, tool_calls=turns[turn])
        return FakeReply(content="Done.")

    return policy


FIX = call("write_file", path="calc.py", content=FIXED)


def solve(
    tmp_path: Path,
    project: Path,
    policy: Callable[[dict[str, Any]], FakeReply],
    *extra: str,
    check: str = CHECK,
) -> tuple[int, FakeOpenAIServer]:
    """`mulligan solve` in this process; a crash (any exception) fails the test as such."""
    with FakeOpenAIServer(policy=policy) as server:
        argv = solve_args(server, project, tmp_path / "mem", "--trials", "1", "--yes", *extra)
        argv = [check if a == CHECK else a for a in argv]
        try:
            code = main(argv)
        except Exception as exc:  # noqa: BLE001 - the point: a traceback instead of a line
            pytest.fail(f"solve crashed instead of saying what is wrong: {exc!r}")
    return code, server


def files_of(root: Path) -> dict[str, bytes | str]:
    """Every entry under root: file bytes, or 'link:TARGET' for a symlink."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[relative] = f"link:{os.readlink(path)}"
        elif path.is_file():
            found[relative] = path.read_bytes()
    return found


def passes_in(project: Path, check: str = CHECK) -> bool:
    return subprocess.run(check, shell=True, cwd=project, capture_output=True).returncode == 0


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
