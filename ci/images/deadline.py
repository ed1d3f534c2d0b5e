"""`build-image --timeout`: one deadline for the whole build, every command under it.

`step` is `door.run` with the command's timeout cut to the time left, so the
door ends the command's whole process tree at the deadline and the build stops
with the door's 124 (137 when KILL was needed), saying which command the time
ran out in. A command's own shorter timeout keeps its meaning.
"""

from __future__ import annotations

import dataclasses
import time

from ci import door
from ci.durations import parse_duration
from ci.errors import Stop, UserError

_deadline: float | None = None
_given = ""


def start(text: str) -> None:
    """Begin the build's clock (`text` as given to --timeout; "" for none); a bad or
    non-positive value exits 2."""
    global _deadline, _given
    seconds = parse_duration(text, name="--timeout") if text else None
    if seconds is not None and seconds <= 0:
        raise UserError(f"--timeout: {text!r} must be longer than 0")
    _deadline = None if seconds is None else time.monotonic() + seconds
    _given = text


def _stop_if_expired(cmd: door.Command, code: int) -> None:
    """At the deadline, a command that failed or timed out is the build running out of time."""
    if _deadline is not None and time.monotonic() >= _deadline - 0.05:
        what = cmd.description or cmd.argv[0]
        raise Stop(
            code,
            f"error: build-image --timeout {_given}: the time ran out during `{what}`; "
            f"its process tree was ended (exit {code})",
        ) from None


def step(cmd: door.Command, output: door.Output = "stderr", check: bool = False) -> door.Result:
    """`door.run` under the build's deadline; also a plan's runner (`door.execute`).
    The command's timeout is cut to the time left; a shorter own timeout is kept."""
    remaining = None if _deadline is None else max(_deadline - time.monotonic(), 0.001)
    bounded = cmd
    if remaining is not None and (cmd.timeout is None or cmd.timeout > remaining):
        bounded = dataclasses.replace(cmd, timeout=remaining)
    try:
        result = door.run(bounded, output=output, check=check)
    except door.CommandFailed as exc:
        _stop_if_expired(cmd, exc.code)
        raise
    if result.timed_out:
        _stop_if_expired(cmd, result.code)
    return result
