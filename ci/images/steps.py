"""Steps that tie two commands together, run in plain code over the door.

The door runs a plan's commands one by one, each failing (or tolerated) on its
own. Two steps of the image builds and the release are more than that, and
say how here, once:

- `SecretPipe`, `aws ecr-public get-login-password | docker login --password-stdin`:
  the first command's stdout is a secret, handed to the second on stdin (never
  in argv) and masked in everything printed from then on.
- `EnsureBuilder`, `docker buildx inspect || docker buildx create`: create runs
  only when inspect failed, and a create that fails is forgiven when a second
  inspect then succeeds (another job created the builder meanwhile).

Each step's `commands` are what the plan lists and what runs; their
descriptions carry the tie in words, so the dry-run still says when a command
runs and where its input comes from.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ci import door
from ci.redact import remember

CONCURRENT = "the builder was created concurrently by another job; using it"


def _with_words(cmd: door.Command, words: str) -> door.Command:
    """The command with its step's policy appended to its description, as the plan shows one."""
    return dataclasses.replace(cmd, description=f"{cmd.description} [{words}]".lstrip())


@dataclass(frozen=True)
class SecretPipe:
    """`source | sink`, where what `source` prints is a secret (a password)."""

    source: door.Command  # prints the secret on stdout
    sink: door.Command  # reads it on stdin

    @property
    def commands(self) -> tuple[door.Command, ...]:
        sink = dataclasses.replace(self.sink, stdin="", stdin_secret=True)
        return (
            _with_words(self.source, "its output is a secret, not shown"),
            _with_words(sink, "stdin: the step before's output"),
        )

    def run(self, runner: door.Runner) -> None:
        """Capture the secret (never shown), remember it, then feed it to the sink's stdin.
        Either failing ends the task with its exit code."""
        source, sink = self.commands
        secret = runner(source, "capture", True).stdout
        if secret.strip():
            # From here on the secret is masked in everything this process prints:
            # echoed lines, error lines, and what later commands write.
            remember(secret)
        runner(dataclasses.replace(sink, stdin=secret), sink.output or "stderr", True)


@dataclass(frozen=True)
class EnsureBuilder:
    """`inspect || create`: a buildx builder that exists afterwards, made if it was missing."""

    inspect: door.Command  # succeeds when the builder exists
    create: door.Command

    @property
    def commands(self) -> tuple[door.Command, ...]:
        again = f"a failure is forgiven if `{shlex.join(self.inspect.argv)}` then succeeds"
        return (
            _with_words(self.inspect, "a failure is tolerated"),
            _with_words(self.create, f"only if the step before failed; {again}"),
        )

    def run(self, runner: door.Runner) -> None:
        """Create the builder only when inspect fails; a failed create ends the task with its
        exit code unless a second inspect finds the builder (it was created meanwhile)."""
        inspect, create = self.commands
        if runner(inspect, "null", False).ok:
            return
        created = runner(create, "stderr", False)
        if created.ok:
            return
        recheck = dataclasses.replace(self.inspect, description=CONCURRENT)
        if not runner(recheck, "null", False).ok:
            raise door.failed(create, created)
        door.note(CONCURRENT)


Step = door.Command | SecretPipe | EnsureBuilder


def plan_commands(steps: Iterable[Step]) -> tuple[door.Command, ...]:
    """The steps' commands in the order they may run: what a plan lists."""
    listed: list[door.Command] = []
    for step in steps:
        listed += [step] if isinstance(step, door.Command) else step.commands
    return tuple(listed)


def run_steps(steps: Sequence[Step], runner: door.Runner = door.run) -> None:
    """Run the steps in order; the first failure not tolerated or forgiven ends the task
    with its exit code (`door.CommandFailed`)."""
    for step in steps:
        if isinstance(step, door.Command):
            door.execute(door.Plan((step,)), check=True, runner=runner)
        else:
            step.run(runner)
