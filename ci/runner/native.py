"""`run-tests`: the native ROCm and NPU jobs, in their job shells (`ci.runner.program.SHELLS`);
xpu goes to `ci.runner.xpu`. CUDA jobs are plain Buildkite commands and have no runner.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping, Sequence

from ci import door
from ci.errors import Stop, UserError
from ci.platforms import Platform, platform_option
from ci.redact import Redactor, secrets_from_env
from ci.runner import xpu
from ci.runner.guard import run_then_end_leftovers
from ci.runner.program import SHELLS, render_program


def program_for(
    platform: Platform, environ: Mapping[str, str], positional: Sequence[str] = ()
) -> str:
    """The program `run-tests --platform <platform>` runs for this environment: on
    TEST_COMMANDS, else the positional words joined by single spaces (`"$*"`). The
    singular TEST_COMMAND is ignored, as in the original."""
    text = environ.get("TEST_COMMANDS") or " ".join(positional)
    return render_program(SHELLS[platform], text, secrets=secrets_from_env(environ))


def run_tests(
    platform: str,
    positional: Sequence[str],
    *,
    timeout: str = "",
    prune: bool = False,
    dry_run: bool = False,
) -> None:
    """rocm/npu: run the rendered program with bash and end with its exit status (128+N
    for signal N); what it leaves running is ended (TERM, then KILL) and listed."""
    if not platform:
        raise UserError("--platform is required: rocm (alias amd), npu or xpu (alias intel)")
    chosen = platform_option(platform)
    if (timeout or prune) and chosen is not Platform.XPU:
        raise UserError(f"--timeout and --prune are for --platform xpu, not {chosen}")
    if chosen is Platform.XPU:
        xpu.run_tests(timeout=timeout, prune=prune, positional=positional, dry_run=dry_run)
        return
    if chosen not in (Platform.ROCM, Platform.NPU):
        allowed = "rocm (alias amd), npu, xpu (alias intel)"
        raise UserError(
            f"--platform: run-tests does not support {chosen}: allowed values are {allowed}"
        )
    program = program_for(chosen, os.environ, positional)
    if dry_run:
        sys.stdout.write(Redactor.for_env()(program))
        sys.stdout.flush()
        return
    with _program_argv(program) as argv:
        command = door.Command(argv, description=f"run-tests ({chosen})")
        code = run_then_end_leftovers(
            lambda received: door.run(command, quiet=True, cancel=received).code,
            "run-tests",
            "job",
        )
    if code != 0:
        raise Stop(code)


# Linux limits one argv string to 128 KiB; the program holds the commands twice.
MAX_INLINE = 100_000


@contextlib.contextmanager
def _program_argv(program: str) -> Iterator[tuple[str, ...]]:
    """`bash -c PROGRAM`, or `bash FILE` for a program too long for one argument."""
    if len(program.encode()) <= MAX_INLINE:
        yield ("bash", "-c", program)
        return
    import tempfile

    with tempfile.NamedTemporaryFile("w", prefix="vllm-omni-ci-", suffix=".sh") as fh:
        fh.write(program)
        fh.flush()
        yield ("bash", fh.name)
