"""`solve`'s preflight: every command check run once on the untouched project, before any
attempt, and what stopped one from running at all (a command the shell cannot start or read,
a module that is not there, pytest finding no test, a timeout), which no change to the
project can mend."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mulligan import sandbox
from mulligan.evaluator.checks import run_command
from mulligan.schema import CommandCheck, Task
from mulligan.solve.copies import JUNK_DIRS, ProjectCopies
from mulligan.text_cut import last_lines

CANNOT_CD = re.compile(r"\bcd: (?:can't cd to (\S+)|(\S+): No such file or directory)")
"""The shell's `cd` to a directory that is not there (dash's words, then bash's)."""


@dataclass
class CheckRun:
    """One check run once on the untouched project, before any attempt."""

    check: CommandCheck
    run: sandbox.RunResult

    @property
    def output(self) -> str:
        """As an attempt's verdict would show it: the command, then what it printed."""
        return f"$ {self.check.command}\n{self.run.describe()}"


def preflight(copies: ProjectCopies, task: Task, policy: sandbox.Policy) -> list[CheckRun]:
    """Every command check once, in order, in one copy of the project as it is now, under
    the policy the attempts' checks run under."""
    with copies(task) as workspace:
        return [
            CheckRun(check, run_command(check, workspace, task.network, policy))
            for check in task.checks
            if isinstance(check, CommandCheck)
        ]


def cannot_run(done: CheckRun, project: Path) -> str | None:
    """What stopped the check from running at all, and the fix; None if it ran (pass or fail).

    Only what no change to the project can mend counts: the shell could not start the command
    (exit 126 or 127) or could not read it, `python -m X` has no X, pytest ran no test (a
    model could only write tests to pass), or the check ran out of time untouched."""
    run, command = done.run, done.check.command
    said = " ".join(last_lines(run.stderr, 1)).strip()
    if run.timed_out:
        return (
            f"timed out after {run.seconds:.0f}s on the untouched project; raise --check-timeout "
            f"(now {done.check.timeout:g}s) or give a faster check"
        )
    if run.exit_code in (126, 127):
        program = _program(command)
        return f"{said or program} (exit {run.exit_code}); {_not_started(program, project)}"
    into = CANNOT_CD.search(said)
    if into and run.exit_code and _left_out(next(g for g in into.groups() if g), project):
        return (
            f"{said} (exit {run.exit_code}); the project has it, but solve leaves it out of "
            "the copies each check runs in (as git ignores it, or a cache or virtual "
            "environment): make the check build what it needs there, or name another"
        )
    if run.exit_code == 2 and not _shell_reads(command):
        return f"{said} (exit 2); the shell cannot read the command: fix its quoting or syntax"
    pytest = re.search(r"(?:^|[\s/])(?:pytest|py\.test)(?:\s|$)", command)
    if pytest and run.exit_code == 4:  # a usage error: no such test path, an unknown option
        return f"{said} (exit 4); pytest could not start: name tests that exist, options it knows"
    if pytest and run.exit_code == 5:
        summary = " ".join(last_lines(run.stdout, 1)).strip()
        return f"{summary}: no tests ran (exit 5); name the tests to run (a file or folder of them)"
    module = re.search(r"(?:^|\s)-m\s+([\w.]+)", command)
    if module and run.exit_code and f"No module named {module.group(1)}" in said:
        return (
            f"{said} (exit {run.exit_code}); install {module.group(1)} for that python, "
            "or name a python that has it"
        )
    return None


def _left_out(directory: str, project: Path) -> bool:
    """A directory of the project that a check could not `cd` into in its copy: left out of
    it. (One the project lacks may be one the check's build was to make: a code fault.)"""
    return not directory.startswith("/") and (project / directory).is_dir()


def _shell_reads(command: str) -> bool:
    """Whether /bin/sh, which runs every check, can parse the command (`-n`: read, not run)."""
    try:
        done = subprocess.run(["/bin/sh", "-n", "-c", command], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return True  # not known: the check's own output says what it says
    return done.returncode == 0


def _not_started(program: str, project: Path) -> str:
    """Why the box's shell could not start `program`, as far as can be told from outside."""
    if "/" in program and not program.startswith("/"):  # relative to the project's root
        path, top = project / program, Path(program).parts[0]
        if top in JUNK_DIRS:
            return (
                f"{top}/ is not copied into the attempts' copies (virtual environments and "
                "caches never are): activate it, then name the program as PATH finds it "
                "(e.g. `python -m pytest`)"
            )
        if not path.is_file():
            return f"{program} is not in the project: give the right path"
        return f"{program} is not executable: chmod +x it, or run it as `sh {program}`"
    found = program if program.startswith("/") else shutil.which(program)
    if not found or not Path(found).exists():
        return f"{program} is not installed or not on the PATH: install it or give its full path"
    return (
        f"outside the box it is {found}, which the box's user cannot reach (a directory only "
        "you can read, such as /root, hides it): name a program it can reach, "
        "e.g. /usr/bin/python3, or make that directory readable"
    )


def _program(command: str) -> str:
    """The command's program: its first word that is not a VAR=value assignment."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return next((w for w in words if not re.match(r"^\w+=", w)), command)
