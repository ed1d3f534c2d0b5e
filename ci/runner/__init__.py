"""Test runners: one rendered bash program per job, plus the step wrapper.

Public API (for the XPU runner and the nox tier sessions):

- `ci.runner.program.render_program(semantics, commands, env=None, *, preflight=None,
  secrets=()) -> str`: the whole job program, runnable with `bash -c` locally or
  `docker run IMAGE bash -c` in a container.
- `ci.runner.program.Semantics`, `Mode` and the pre-flight `Check` values
  (`DockerDisabled`, `RequireCommands`, `Section`, `CacheDirs`, `PersistentHfCache`,
  `RocmGpus`): the building blocks.
- `ci.runner.native.ROCM` / `NPU` and `program_for(platform, environ, positional)`.
"""
