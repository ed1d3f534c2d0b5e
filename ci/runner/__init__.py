"""Test runners: one rendered bash program per job (`program`, used by `native`,
`xpu` and the tiers), the `step` wrapper, its tee (`teelog`), the leak check
(`leaks`) and the signal guard of their cleanup (`guard`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ci.door import Command, Result


def run_reporting(cmd: Command) -> Result:
    """`door.run`, and a command that could not start says why on stderr (not a bare 127:
    the door leaves that text to callers that capture)."""
    from ci import door

    result = door.run(cmd)
    if result.stderr:  # only set when the command never started (output is streamed)
        door.note(result.stderr.strip())
    return result
