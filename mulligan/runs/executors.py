"""Where episodes run: on threads in this process (the default), or on a Ray cluster.

Whatever the executor, this process alone writes the episode log. `threads` is
`run_tasks`' own thread pool; `ray` lives in `ray_executor` (imported only when
chosen, so the extra is needed only then).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mulligan.errors import UserError
from mulligan.inputs.memory_files import is_server

if TYPE_CHECKING:  # the one executor besides threads (ray loads only when it is chosen)
    from mulligan.runs.ray_executor import RayExecutor as Executor

QUIET_RAY = {"RAY_USAGE_STATS_ENABLED": "0"}
"""Ray sends no usage report anywhere (set unless the user set it)."""


def open_executor(
    name: str, address: str | None, *, concurrency: int, memory_location: str, uses_store: bool
) -> Executor | None:
    """None for `threads`; for `ray`, a connection to the cluster, checked before any work.

    `memory_location` is what --memory names; `uses_store` says whether a strategy reads or
    writes the lesson store (reflexion-memory)."""
    if name == "threads":
        if address:
            raise UserError("--ray-address needs --executor ray")
        return None
    for key, value in QUIET_RAY.items():
        os.environ.setdefault(key, value)
    try:
        from mulligan.runs import ray_executor
    except ImportError as exc:
        if "ray" not in str(exc):
            raise
        raise UserError(
            '--executor ray needs Ray: pip install "mulligan[ray]" (or use --executor threads)'
        ) from None
    executor = ray_executor.RayExecutor(address, concurrency=concurrency)
    try:
        check_memory_for_cluster(executor.node_count(), memory_location, uses_store)
    except UserError:
        executor.close()
        raise
    return executor


def check_memory_for_cluster(nodes: int, memory_location: str, uses_store: bool) -> None:
    """Lessons shared between machines live on a chroma server, never in one machine's directory."""
    if nodes > 1 and uses_store and not is_server(memory_location):
        raise UserError(
            f"--executor ray: the cluster has {nodes} nodes, but the lesson memory is the "
            f"directory {memory_location}, which only this machine sees; run a chroma server "
            "(`chroma run --path DIR --port 8000`) and pass --memory http://HOST:8000"
        )
