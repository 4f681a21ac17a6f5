"""The model client's retries without the waits between them: every retry the client allows
is made, against the same replies, only the backoff before it is not slept (1 s, 2 s, 4 s
by default: seven seconds a failing call). In this process (`unwaited`, for a fixture), or
in a child that runs the command line as `python -m mulligan.cli` does:

    python -m tests.helpers.retry_waits mulligan-arguments...
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from mulligan.llm.openai_client import OpenAIChatModel


def unwaited(init: Callable[..., None]) -> Callable[..., None]:
    """`OpenAIChatModel.__init__` for clients that retry at once."""

    def made(model: OpenAIChatModel, *args: Any, **kwargs: Any) -> None:
        init(model, *args, **kwargs)
        model._sleep = lambda seconds: None

    return made


if __name__ == "__main__":
    from mulligan.cli import entry

    OpenAIChatModel.__init__ = unwaited(OpenAIChatModel.__init__)  # type: ignore[method-assign]
    sys.argv[0] = "mulligan"
    entry()
