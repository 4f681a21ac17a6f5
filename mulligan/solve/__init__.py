"""`solve` below the command line: copies of the user's project, the diffs between them, and
the repair pipeline (localise from the failure, search/replace edits, select by the checks)."""
