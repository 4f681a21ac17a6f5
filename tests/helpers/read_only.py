"""A directory its user cannot write in, also when the tests run as root (who writes through
a mode of 0o555): then the directory is made immutable, or the test is skipped."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def read_only(directory: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield directory
        finally:
            directory.chmod(0o755)
        return
    made = subprocess.run(["chattr", "+i", str(directory)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"root writes anywhere, and chattr +i failed: {made.stderr!r}")
    try:
        yield directory
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)
