"""Test runners: one rendered bash program per job, plus the step wrapper.

Public API (for the XPU runner and the nox tier sessions):

- `ci.runner.program.render_program(semantics, commands, env=None, *, preflight=None,
  secrets=()) -> str`: the whole job program, runnable with `bash -c` locally or
  `docker run IMAGE bash -c` in a container.
- `ci.runner.program.Semantics`, `Mode` and the `PreflightCheck` values
  (`DockerDisabled`, `RequireCommands`, `GpuCount`, `Section`, `CacheDirs`,
  `PersistentHfCache`, `RocmGpus`): the building blocks.
- `ci.runner.leaks.end_leftovers(keep)`: end what a command left running;
  `ci.runner.guard.signals_deferred()`: a signal during that cleanup waits for it.
- `ci.runner.native.ROCM` / `NPU` and `program_for(platform, environ, positional)`.
- `run_reporting(cmd)`: `door.run` for runners, saying why a command could not start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ci.door import Command, Result


def run_reporting(cmd: Command) -> Result:
    """`door.run`, and a command that could not start says why on stderr.

    The door returns "command not found" / "cannot start" as the result's text
    without printing it (callers that capture decide); a runner streaming the
    command's output must not end with a bare 127.
    """
    from ci import door

    result = door.run(cmd)
    if result.stderr:  # only set when the command never started (output is streamed)
        door.note(result.stderr.strip())
    return result
