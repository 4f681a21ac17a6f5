"""Children that a test interrupts with Ctrl-C start as they would from a terminal.

A non-interactive shell starts a background job (`pytest ... &`) with SIGINT ignored, and
its children inherit that; Python then installs no KeyboardInterrupt handler, so a SIGINT the
test sends is lost and the child runs to its end. Pass `ctrl_c_reaches_it` as `preexec_fn`.
"""

from __future__ import annotations

import signal


def ctrl_c_reaches_it() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
