"""The box: run model-written code and commands as hostile code.

Every run gets, where Linux namespaces are available (through bubblewrap, `bwrap`, or,
where it is missing, util-linux `unshare`; see levels.py):
  - a read-only view of the host, with its workspace (and a scratch directory) the only
    writable places, and its own empty /tmp, /var/tmp and /dev/shm;
  - a home of its own in place of the user's, holding only the user's toolchain (what
    `PATH` finds there: a venv, pyenv, conda, `~/.local/bin`), read-only;
  - no network (its own network namespace with only a loopback) unless `Limits.network`;
  - its own process namespace: it sees no other process, and when the run ends or its
    wall-clock limit passes, every descendant dies with it (daemons and `setsid` ones too);
  - the paths its `Policy` hides (datasets with answers, mulligan's own memory) covered.
Always: CPU, address-space, file-size and process-count limits; a scrubbed environment;
output streamed into capped buffers (what passes the cap is counted and dropped); as root,
an unprivileged user id of its own for every run.

Without namespaces the box falls back to those limits alone, says so once, and `mulligan
doctor` shows which protections are off.
"""

from mulligan.sandbox.box import run_python, run_shell, run_tests
from mulligan.sandbox.levels import containment
from mulligan.sandbox.policy import Policy, hide, shared_policy
from mulligan.sandbox.results import Limits, RunResult, signal_name
from mulligan.sandbox.workspaces import ScratchWorkspace

__all__ = [
    "Limits",
    "Policy",
    "RunResult",
    "ScratchWorkspace",
    "containment",
    "hide",
    "run_python",
    "run_shell",
    "run_tests",
    "shared_policy",
    "signal_name",
]
