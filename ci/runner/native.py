"""`run-tests --platform rocm|npu`: the job shells of the native ROCm and NPU jobs.

ROCm replaces `run-amd-test.sh` (MI300 pods, no Docker): every command runs and
the first failure is kept. NPU jobs ran under Buildkite's `bash -e -c`: they stop
at the first failure. Both are `Semantics` of `ci.runner.program`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping, Sequence

from ci import door
from ci.errors import Stop
from ci.platforms import Platform
from ci.redact import Redactor, secrets_from_env
from ci.runner.guard import run_then_end_leftovers
from ci.runner.program import (
    CacheDirs,
    DockerDisabled,
    GpuCount,
    Mode,
    PersistentHfCache,
    RequireCommands,
    RocmGpus,
    Section,
    Semantics,
    render_program,
)

ROCM = Semantics(
    platform="rocm",
    defaults=(
        ("PYTHONFAULTHANDLER", "1"),
        ("HF_HOME", "/home/buildkite-agent/huggingface"),
        ("HF_HUB_DOWNLOAD_TIMEOUT", "300"),
        ("HF_HUB_ETAG_TIMEOUT", "60"),
        ("MIOPEN_DEBUG_CONV_DIRECT", "0"),
        ("MIOPEN_DEBUG_CONV_GEMM", "0"),
        ("VLLM_ROCM_USE_AITER", "0"),
        ("PYTHONPATH", ".."),
    ),
    forced=(("PYTORCH_ROCM_ARCH", ""),),
    preflight=(
        DockerDisabled(),
        RequireCommands(),
        GpuCount(),  # an input: checked before the cache folders and HF_HOME are made
        Section("Native in-pod ROCm CI"),
        CacheDirs(),
        PersistentHfCache(),
        RocmGpus(),
    ),
    mode=Mode.RUN_ALL,
    allow_no_tests=True,
)

NPU = Semantics(
    platform="npu",
    # The legacy NPU image set this ENV; every NPU test YAML sets it too.
    defaults=(("VLLM_WORKER_MULTIPROC_METHOD", "spawn"),),
    preflight=(RequireCommands(), Section("Ascend NPU tests")),
    mode=Mode.FAIL_FAST,
    allow_no_tests=False,
)

SEMANTICS: dict[Platform, Semantics] = {Platform.ROCM: ROCM, Platform.NPU: NPU}


def command_text(environ: Mapping[str, str], positional: Sequence[str]) -> str:
    """TEST_COMMANDS wins; else the positional words joined by single spaces (`"$*"`).
    The singular TEST_COMMAND is ignored, as in the original."""
    return environ.get("TEST_COMMANDS") or " ".join(positional)


def program_for(
    platform: Platform, environ: Mapping[str, str], positional: Sequence[str] = ()
) -> str:
    """The program `run-tests --platform <platform>` runs for this environment."""
    text = command_text(environ, positional)
    return render_program(SEMANTICS[platform], text, secrets=secrets_from_env(environ))


def run_tests(platform: Platform, positional: Sequence[str], *, dry_run: bool = False) -> None:
    """Run the rendered program with bash; end with its exit status (128+N for signal N).

    What it leaves running is ended (TERM, then KILL) and listed; the status stays its own.
    """
    program = program_for(platform, os.environ, positional)
    if dry_run:
        sys.stdout.write(Redactor.for_env()(program))
        sys.stdout.flush()
        return
    with _program_argv(program) as argv:
        command = door.Command(argv, description=f"run-tests ({platform})")
        code = run_then_end_leftovers(
            lambda _: door.run(command, quiet=True).code, "run-tests", "job"
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
