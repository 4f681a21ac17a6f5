"""The exit statuses, the same for every command (docs/settings.md lists them from here)."""

from __future__ import annotations

PASSED = 0
FAILED = 1
BAD_INPUT = 2
INTERRUPTED = 130

EXIT_STATUSES = {
    PASSED: "the command did what it was asked; for run, bench and solve: every task passed",
    FAILED: "it ran, but something failed: a task did not pass, the endpoint failed, or the "
    "agent stopped with an error (a budget, the model's behaviour); an endpoint that stops "
    "answering stops the run, which --resume RUN_ID continues once it answers again",
    BAD_INPUT: "bad input or usage, reported in one line before any work starts (a flag, a "
    "setting, a task file, a memory directory, an endpoint that cannot be reached)",
    INTERRUPTED: "interrupted (Ctrl-C); a run can be continued with --resume RUN_ID",
}
