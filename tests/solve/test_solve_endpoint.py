"""`solve` when the endpoint refuses every request (a task too long for the model's context,
a wrong model name): the summary says the endpoint's reason, not only what the untouched
project's check printed, as if the model had tried and failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mulligan.testing import FakeReply
from tests.helpers.solving import solve
from tests.solve.projects import CHECK, make_shapes
from tests.solve.test_solve import BUGGY, make_project

TOO_LONG = "This model's maximum context length is 32768 tokens; you requested 950000 tokens."


def refused(body: dict[str, Any]) -> FakeReply:
    return FakeReply(status=400, error=TOO_LONG)


@pytest.mark.parametrize("strategy", ["reflexion-memory", "patch"])
def test_an_endpoint_that_refuses_every_request_is_named_in_the_summary(
    strategy: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if strategy == "patch":
        project, check = make_shapes(tmp_path / "shapes"), CHECK
    else:
        project, check = make_project(tmp_path / "calc"), "python3 test_calc.py"
    code, _ = solve(tmp_path, project, refused, "--apply", "--strategy", strategy, check=check)
    err = capsys.readouterr().err
    assert code == 1  # (a crash would fail in `solve`)
    assert "model_error" in err and "maximum context length" in err, err
    if strategy != "patch":
        assert (project / "calc.py").read_text() == BUGGY
