"""A runner's command, then the end of what it left running, safe from signals.

A signal normally raises `door.Interrupted` wherever the task is; a runner ending
its command's leftovers must not be cut short so. Here a signal is only recorded
and the runner ends with 128+N after its cleanup; a second signal ends it at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

from ci.door import FORWARDED_SIGNALS, Interrupted
from ci.runner import leaks


def run_then_end_leftovers(
    run: Callable[[list[int]], int], who: str, what: str, after: Callable[[], None] = lambda: None
) -> int:
    """`run(received)`'s exit code, and then what it left running is ended and listed, and
    `after()` runs, also after a signal (which then ends us with 128+N: 143, 130, 129).
    SIGTERM, SIGINT and SIGHUP are recorded in `received` (only the main thread can
    catch them)."""
    received: list[int] = []

    def interrupted() -> Interrupted:
        return Interrupted(128 + received[0], f"interrupted by signal {received[0]}")

    def record(signum: int, _frame: FrameType | None) -> None:
        if received:  # a second signal: stop waiting for the cleanup
            raise interrupted()
        received.append(signum)

    catch = threading.current_thread() is threading.main_thread()
    old = {sig: signal.signal(sig, record) for sig in FORWARDED_SIGNALS} if catch else {}
    stopped: Interrupted | None = None
    code = 0
    try:
        ours = leaks.snapshot("tree")  # not the command's: never ended
        try:
            if not received:
                code = run(received)
        except Interrupted as exc:  # a signal while the command ran: its tree is ended
            stopped = exc
        finally:
            leaks.end_and_list_leftovers(ours, who, what)
            after()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if stopped is not None:
        raise stopped
    if received:
        raise interrupted()
    return code
