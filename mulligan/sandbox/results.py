"""What a run may use (`Limits`) and what it left (`RunResult`)."""

from __future__ import annotations

import signal
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    timeout: float = 10.0
    cpu_seconds: int = 10
    memory_bytes: int = 1 << 30
    file_bytes: int = 16 << 20
    processes: int = 32
    output_chars: int = 20_000
    """Bytes kept of each of stdout and stderr (head and tail); the rest is counted and dropped."""
    network: bool = False


@dataclass
class RunResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    stdout_dropped: int = 0
    stderr_dropped: int = 0
    report: str | None = None
    """What the program wrote to its report descriptor (only for runs that asked for one)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def describe(self) -> str:
        """stdout and stderr together, with the exit status when it is not 0."""
        parts = []
        if self.stdout.strip():
            parts.append(self.stdout.rstrip())
        if self.stderr.strip():
            parts.append("[stderr]\n" + self.stderr.rstrip())
        if self.timed_out:
            parts.append(f"[timed out after {self.seconds:.1f}s; every process killed]")
        elif self.exit_code not in (0, None):
            parts.append(f"[exit status {self.exit_code}{signal_name(self.exit_code)}]")
        return "\n".join(parts) if parts else "(no output)"


def signal_name(code: int | None) -> str:
    if code is None or code >= 0:
        return ""
    try:
        return f": killed by {signal.Signals(-code).name}"
    except ValueError:
        return ""
