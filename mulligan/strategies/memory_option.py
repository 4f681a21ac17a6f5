"""The `memory` option of the strategies that read no store by default (`retry[memory]`,
`select[memory]`): the same strategy given the persistent store, so that the memory is its
only difference from the no-memory baseline it otherwise is. Its attempts see the store's
validated lessons from trial 1 and, from trial 2 on, verify a candidate while working
(memory/assignment.py)."""

from mulligan.strategies.base import Option

GIVEN = "given the persistent store: its validated lessons from trial 1, a candidate tried on"
READS = Option(
    "memory",
    "memory",
    f"{GIVEN} later attempts by assignment",
    {"uses_store": True, "verifies": True},
)
"""Reads and verifies; the lessons come from other writers (a reflexion-memory session, an
import, a report over MCP)."""
READS_ONLY = Option("read-memory", "memory", READS.summary + ", writing nothing", READS.sets)
"""`retry[read-memory]`: retry given a store someone else writes (lessons imported, or reported
over MCP), so what its attempts are shown is those lessons alone."""
WRITES = Option(
    "memory",
    "memory",
    f"{GIVEN} later attempts by assignment, and after a failed attempt a general lesson "
    "written into it (its diagnosis goes nowhere: nothing is carried)",
    {"reflects": True, "uses_store": True, "writes_store": True, "verifies": True},
)
"""Reads, verifies and writes: the reflector writes a general lesson after a failed attempt,
as reflexion-memory's does, but nothing is carried from one attempt to the next."""
