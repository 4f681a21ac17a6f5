"""Resource hogs: memory, processes, disk and CPU stay within the box's limits, and the run
reports what stopped it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mulligan import sandbox
from mulligan.sandbox import Limits
from tests.helpers.boxing import (
    host_paths,
    marker,
    survivors,
    token,
    workspace,
)

__all__ = ["marker", "host_paths", "workspace"]  # fixtures from tests/helpers/boxing.py


# ---------------------------------------------------------------- 6. resource limits


@pytest.mark.timeout(40)
def test_shell_fork_bomb_is_contained(marker: str) -> None:
    bomb = f": {marker}; echo started; bomb() {{ bomb | bomb & }}; bomb"
    result = sandbox.run_shell(bomb, limits=Limits(timeout=3, processes=16))
    assert "started" in result.stdout, result.describe()
    assert survivors(marker) == []
    assert sandbox.run_python("print(1)").stdout.strip() == "1"


@pytest.mark.timeout(40)
def test_fork_bomb_that_escapes_its_session_is_contained(marker: str) -> None:
    code = (
        "import os, sys\n"
        "print('started', flush=True)\n"
        "while True:\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            os.setsid()\n"
        "            os.execv(sys.executable, [sys.executable, '-c', "
        "'import time; time.sleep(10**6)', '" + marker + "'])\n"
        "    except OSError:\n"
        "        pass\n"
    )
    result = sandbox.run_python(code, limits=Limits(timeout=3, processes=16))
    assert "started" in result.stdout, result.describe()
    assert survivors(marker) == []
    assert sandbox.run_python("print(1)").stdout.strip() == "1"


def test_growing_memory_hog_is_stopped() -> None:
    code = (
        "print('started', flush=True)\nhog = []\nwhile True:\n    hog.append(bytearray(32 << 20))\n"
    )
    result = sandbox.run_python(code, limits=Limits(timeout=20, memory_bytes=256 << 20))
    assert "started" in result.stdout, result.describe()
    assert not result.ok and not result.timed_out, result.describe()


HUGE_FILE = """
import os
print("started", flush=True)
with open({path!r}, "wb") as handle:
    for _ in range(64):
        handle.write(b"x" * (1 << 20))
        handle.flush()
print("WROTE ALL")
"""


def test_huge_file_in_the_workspace_is_cut_at_the_limit(workspace: Path) -> None:
    target = workspace / "big.bin"
    limits = Limits(file_bytes=4 << 20)
    result = sandbox.run_python(
        HUGE_FILE.format(path=str(target)), cwd=workspace, writable=True, limits=limits
    )
    assert "started" in result.stdout, result.describe()
    assert "WROTE ALL" not in result.stdout and not result.ok
    assert not target.exists() or target.stat().st_size <= limits.file_bytes


@pytest.mark.parametrize("directory", ["/tmp", "/dev/shm"])
def test_huge_file_in_a_temp_directory_is_cut_and_stays_in_the_box(
    directory: str, host_paths: list[Path]
) -> None:
    target = Path(directory) / f"mulligan-big-{token()}"
    host_paths.append(target)
    result = sandbox.run_python(
        HUGE_FILE.format(path=str(target)), limits=Limits(file_bytes=4 << 20)
    )
    assert "started" in result.stdout, result.describe()
    assert "WROTE ALL" not in result.stdout and not result.ok
    assert not os.path.lexists(target)


TREE_HOG = """
import os, time
r, w = os.pipe()
children = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        try:
            block = b"x" * (150 << 20)
        except MemoryError:
            os._exit(1)
        os.write(w, b"%d " % os.getpid())
        time.sleep(60)
        os._exit(0)
    children.append(pid)
print("started", flush=True)
time.sleep(3)
os.set_blocking(r, False)
try:
    holders = {int(line) for line in os.read(r, 4096).split()}
except BlockingIOError:
    holders = set()
alive = sum(1 for pid in holders if os.waitpid(pid, os.WNOHANG) == (0, 0))
print("alive holding", alive, flush=True)
"""
# A child counts once its 150 MB are allocated: at the limit, the kernel may stall the
# others in the allocation (alive, holding less) instead of killing them.


@pytest.mark.timeout(60)
def test_memory_limit_holds_for_the_whole_process_tree() -> None:
    # Six processes of 150 MB each: each fits the per-process limit, together they do not.
    limits = Limits(timeout=10, memory_bytes=256 << 20)
    result = sandbox.run_python(TREE_HOG, limits=limits)
    assert "started" in result.stdout, result.describe()
    said = [line for line in result.stdout.splitlines() if line.startswith("alive holding")]
    if said:
        alive = int(said[0].split()[-1])
        assert alive * (150 << 20) <= limits.memory_bytes, result.describe()
    else:  # the whole tree was killed for it: also contained
        assert not result.ok, result.describe()


FILL_TEMP = """
import os
print("started", flush=True)
written = 0
try:
    os.makedirs({directory!r}, exist_ok=True)
    for i in range(48):
        with open(os.path.join({directory!r}, f"fill-{{i}}"), "wb") as handle:
            for _ in range(8):
                handle.write(b"x" * (1 << 20))
        written += 8
except OSError as exc:
    print("stopped:", type(exc).__name__, flush=True)
print("written MB", written, flush=True)
"""


@pytest.fixture
def host_directory() -> Iterator[list[Path]]:
    import shutil

    made: list[Path] = []
    yield made
    for directory in made:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("base", ["/tmp", "/dev/shm"])
def test_filling_a_memory_backed_temp_directory_is_stopped(
    base: str, host_directory: list[Path]
) -> None:
    # 384 MB in 8 MB files: each file is under the file-size limit; the box's /tmp lives in memory.
    directory = Path(base) / f"mulligan-fill-{token()}"
    host_directory.append(directory)
    limits = Limits(timeout=20, memory_bytes=128 << 20)
    result = sandbox.run_python(FILL_TEMP.format(directory=str(directory)), limits=limits)
    assert "started" in result.stdout, result.describe()
    assert "written MB 384" not in result.stdout, result.describe()
    assert not directory.exists()
