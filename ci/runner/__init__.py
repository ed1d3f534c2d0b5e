"""Test runners: one rendered bash program per job (`program`, used by `native`,
`xpu` and the tiers), the `step` wrapper, the leak check (`leaks`) and the signal guard
of their cleanup (`guard`).
"""

from __future__ import annotations

from ci import door


def run_reporting(
    cmd: door.Command, cancel: list[int] | None = None, log: str | None = None
) -> door.Result:
    """`door.run`, and a command that could not start says why on stderr (not a bare 127:
    the door leaves that text to callers that capture). `cancel`, `log`: as `door.run`'s."""
    result = door.run(cmd, cancel=cancel, log=log)
    if result.stderr:  # only set when the command never started (output is streamed)
        door.note(result.stderr.strip())
    return result
