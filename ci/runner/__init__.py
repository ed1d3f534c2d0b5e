"""Test runners: one rendered bash program per job (`program`, used by `native`,
`xpu` and the tiers), the `step` wrapper, the tee of tier jobs (`teelog`, behind
`teed`), the leak check (`leaks`) and the signal guard of their cleanup (`guard`).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ci.runner.teelog import BOOTSTRAP, package_parent

if TYPE_CHECKING:
    from ci.door import Command, Result


def teed(argv: Sequence[str], name: str, log: str, mode: str, status: str) -> tuple[str, ...]:
    """`bash -c` running `argv` with its output through our tee (`ci.runner.teelog`) into
    `log`, with the tee's MODE and STATUS; the status stays `argv`'s."""
    tee = shlex.join([sys.executable, "-I", "-c", BOOTSTRAP, package_parent()])
    script = f'tee=("${{@:1:3}}"); shift 3; "$@" 2>&1 | {tee} "${{tee[@]}}"; '
    return ("bash", "-c", script + 'exit "${PIPESTATUS[0]}"', name, log, mode, status, *argv)


def run_reporting(cmd: Command, cancel: list[int] | None = None, log: str | None = None) -> Result:
    """`door.run`, and a command that could not start says why on stderr (not a bare 127:
    the door leaves that text to callers that capture). `cancel`, `log`: as `door.run`'s."""
    from ci import door

    result = door.run(cmd, cancel=cancel, log=log)
    if result.stderr:  # only set when the command never started (output is streamed)
        door.note(result.stderr.strip())
    return result
