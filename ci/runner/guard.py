"""Signals while a runner cleans up: recorded, acted on once the cleanup is done.

A signal normally raises `door.Interrupted` wherever the task is; a runner ending
its command's leftovers must not be cut short so. Inside `signals_deferred()` a
signal is only recorded and the runner ends with 128+N after its cleanup; a
second signal ends it at once.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from ci.door import FORWARDED_SIGNALS, Interrupted
from ci.runner import leaks


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


def run_then_end_leftovers(
    run: Callable[[list[int]], int], who: str, what: str, after: Callable[[], None] = lambda: None
) -> int:
    """`run(received)`'s exit code, and then what it left running is ended and listed, and
    `after()` runs, also after a signal (which then ends us with 128+N)."""
    stopped: Interrupted | None = None
    code = 0
    with signals_deferred() as received:
        ours = leaks.snapshot("tree")  # not the command's: never ended
        try:
            if not received:
                code = run(received)
        except Interrupted as exc:  # a signal while the command ran: its tree is ended
            stopped = exc
        finally:
            leaks.end_and_list_leftovers(ours, who, what)
            after()
    if stopped is not None:
        raise stopped
    if received:
        raise interrupted(received[0])
    return code
