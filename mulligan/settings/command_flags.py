"""The numbers commands take that are not settings (a run's selection and output): each
defined once, like a setting, as a field with its type, default, bounds and help. The parser
adds them with `add_command_flag`; pydantic checks their bounds (cli/flag_checks.py)."""

from __future__ import annotations

from pydantic import Field

from mulligan.defaults import LESSON_BUDGET, MAX_CHECK_SECONDS, MERGE_SIMILARITY
from mulligan.settings.run_config import Section


class CommandFlags(Section):
    """Numbers a command takes that are not settings (its selection and output): their
    type, default, bounds and help, defined here once like a setting's. No file or
    variable sets them."""

    limit: int | None = Field(default=None, ge=1, description="the first N tasks")
    sample: int | None = Field(default=None, ge=1, description="a seeded random sample of N tasks")
    seed: int = Field(default=0, description="seeds the sample and the task order")
    passes: int = Field(default=1, ge=1, description="run the suite again over the memory")
    repeats: int = Field(
        default=1,
        ge=1,
        description="run the whole study K times over, each repeat drawing its own attempts "
        "(trial 1 too), into one run; the report gives the spread, pass@k and pass^k",
    )
    k: int = Field(default=5, ge=1, description="results for search")
    port: int | None = Field(
        default=None, ge=1, le=65535, description="port on 127.0.0.1 (default: a free one)"
    )
    check_timeout: float = Field(
        default=120.0,
        gt=0,
        le=MAX_CHECK_SECONDS,
        allow_inf_nan=False,
        description="seconds per check",
    )
    lesson_budget: int | None = Field(
        default=None,
        ge=0,
        description=f"the curator keeps the most trusted lessons up to this many tokens "
        f"(default {LESSON_BUDGET})",
    )
    merge_similarity: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description=f"the curator merges lessons at least this similar (default "
        f"{MERGE_SIMILARITY})",
    )
