"""`solve` below the command line: copies of the user's project, the diffs between them, and
the repair pipeline (localise from the failure, search/replace edits, select by the checks).

The names most callers need are re-exported here."""

from mulligan.solve.copies import ChangeRecordingEvaluator, Project, ProjectCopies, digests
from mulligan.solve.diffs import unified_diff
from mulligan.solve.preflight import CheckRun, cannot_run, preflight

__all__ = [
    "ChangeRecordingEvaluator",
    "CheckRun",
    "Project",
    "ProjectCopies",
    "cannot_run",
    "digests",
    "preflight",
    "unified_diff",
]
