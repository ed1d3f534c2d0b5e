"""A runner's command, then the end of what it left running, safe from signals.

A signal normally raises `door.Interrupted` wherever the task is; a runner ending
its command's leftovers must not be cut short so. Here a signal is only recorded
and the runner ends with 128+N after its cleanup (N: the first signal); a second
signal KILLs what is left at once, without its grace; a third ends us at once.
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
    `after()` runs, also after a signal (which then ends us with 128+N: 143, 130, 129,
    131). The `FORWARDED_SIGNALS` are recorded in `received` (only the main thread can
    catch them); `run` hands it to `door.run` as `cancel`, so that a signal the door
    records while the command runs counts here too."""
    received: list[int] = []

    def interrupted() -> Interrupted:
        return Interrupted(128 + received[0], f"interrupted by signal {received[0]}")

    def record(signum: int, _frame: FrameType | None) -> None:
        if len(received) >= 2:  # a third signal: stop the cleanup itself
            raise interrupted()
        received.append(signum)  # a second one hurries it (`hurry` below)

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
            if not received:  # the door's own record (a `run` that passes no `cancel`)
                received.append(exc.code - 128)
        finally:
            leaks.end_and_list_leftovers(ours, who, what, hurry=lambda: len(received) > 1)
            after()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if stopped is not None:
        raise stopped
    if received:
        raise interrupted()
    return code
