"""Checks of what a user gives, run before any work starts: each failure is one UserError line
naming the place and the fix: output paths and text files (`paths`), memory directories and
their SQLite files (`memory_files`). A command checks everything it can first, so a bad input
never leaves half a run behind."""
