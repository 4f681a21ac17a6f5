"""A small project for the repair pipeline's tests: a package with two functions and a test
script of test functions, and a scripted endpoint that answers with search/replace blocks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mulligan.testing import FakeReply
from tests.helpers.solving import NO_LESSON, reflecting

AREA = (
    "def square(side):\n"
    "    return side * side\n"
    "\n"
    "\n"
    "def rect(width, height):\n"
    "    return width + height\n"
)
"""rect() has the bug: + for *."""
TESTS = (
    "from shapes.area import rect, square\n"
    "\n"
    "\n"
    "def test_square():\n"
    "    assert square(3) == 9, square(3)\n"
    "\n"
    "\n"
    "def test_rect():\n"
    "    assert rect(2, 5) == 10, rect(2, 5)\n"
    "\n"
    "\n"
    "test_square()\n"
    "test_rect()\n"
    "print('ok')\n"
)
CHECK = "PYTHONPATH=. python3 tests/test_area.py"


def make_shapes(root: Path, area: str = AREA) -> Path:
    (root / "shapes").mkdir(parents=True)
    (root / "shapes" / "__init__.py").write_text("")
    (root / "shapes" / "area.py").write_text(area)
    (root / "tests").mkdir()
    (root / "tests" / "test_area.py").write_text(TESTS)
    return root


def block(search: str, replace: str, path: str = "shapes/area.py") -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


RIGHT = block("    return width + height", "    return width * height")
WRONG = block("    return width + height", "    return width - height")
WORDY = block(  # right too, and changes one more line
    "def rect(width, height):\n    return width + height",
    "def rect(width, height):  # the area\n    return width * height",
)


def replying(*replies: str) -> Callable[[dict[str, Any]], FakeReply]:
    """The actor's requests get these replies in the order they arrive (the last one again
    when they run out); the reflector's get an empty lesson."""
    lock = threading.Lock()
    given: list[str] = []

    def policy(body: dict[str, Any]) -> FakeReply:
        if reflecting(body):
            return FakeReply(content=NO_LESSON)
        with lock:
            reply = replies[min(len(given), len(replies) - 1)]
            given.append(reply)
        return FakeReply(content=reply)

    return policy


def prompts_sent(requests: list[dict[str, Any]]) -> list[str]:
    """The text of the last message of every request that was not the reflector's."""
    return [str(b["messages"][-1]["content"]) for b in requests if not reflecting(b)]
