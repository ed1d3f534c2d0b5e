"""Signals while a runner cleans up: recorded, acted on once the cleanup is done.

Between commands, SIGTERM/SIGINT/SIGHUP raise `door.Interrupted` wherever the
task happens to be (`door.install_interrupt_handlers`). A runner that must end
what its command left behind cannot be cut short there: a TERM during the leak
check's settling would leave the leaked processes running. Inside
`signals_deferred()` the signal is only recorded; the runner looks at the list,
finishes its cleanup, then ends with 128+N (`interrupted`); a second signal
ends it at once (the cleanup is then cut short). While a command
runs, `door.run` still installs its own handlers (forwarding to the command's
tree), and puts these back afterwards.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from ci.door import FORWARDED_SIGNALS, Interrupted


@contextlib.contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """Record SIGTERM/SIGINT/SIGHUP in the yielded list instead of raising (main thread)."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def record(signum: int, _frame: FrameType | None) -> None:
        if received:  # a second signal: stop waiting for the cleanup
            raise interrupted(received[0])
        received.append(signum)

    old = {sig: signal.signal(sig, record) for sig in FORWARDED_SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def interrupted(signum: int) -> Exception:
    """The exception that ends the task as a signal to us does: exit 128+N (143, 130, 129)."""
    return Interrupted(128 + signum, f"interrupted by signal {signum}")
