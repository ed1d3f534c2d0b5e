"""`run-tests`: the job shells of the native ROCm and NPU jobs; xpu goes to `ci.runner.xpu`.

ROCm replaces `run-amd-test.sh` (MI300 pods, no Docker): every command runs and
the first failure is kept. NPU jobs ran under Buildkite's `bash -e -c`: they stop
at the first failure. Both are `Semantics` of `ci.runner.program`. CUDA jobs are
plain Buildkite commands and have no runner.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Iterator, Mapping, Sequence

from ci import door
from ci.errors import Stop, UserError
from ci.platforms import Platform, platform_option
from ci.redact import Redactor, secrets_from_env
from ci.runner import xpu
from ci.runner.guard import run_then_end_leftovers
from ci.runner.program import REQUIRE_COMMANDS, Semantics, refuse, render_program, section

# MI300 jobs run natively in the pod: refuse unless VLLM_CI_DOCKER_DISABLED is exactly 1.
DOCKER_DISABLED = refuse(
    '"${VLLM_CI_DOCKER_DISABLED:-0}" != "1"',
    "Error: MI300 CI must run natively with Docker disabled.",
)

# VLLM_CI_EXPECTED_GPU_COUNT is a non-negative integer (unset or empty: 1), else exit 1.
GPU_COUNT = (
    '__omni_ci_gpus="${VLLM_CI_EXPECTED_GPU_COUNT:-1}"\n'
    'if [[ ! "${__omni_ci_gpus}" =~ ^[0-9]+$ ]]; then\n'
    "    echo \"error: VLLM_CI_EXPECTED_GPU_COUNT must be a non-negative integer, got '${__omni_ci_gpus}'.\" >&2\n"  # noqa: E501
    "    exit 1\n"
    "fi"
)

_CACHE_DIRS = """\
__omni_ci_sanitize() {
    local LC_ALL=C.UTF-8
    local raw="$1"
    printf '%s' "${raw//[^A-Za-z0-9_.-]/_}"
}
__omni_ci_job="${BUILDKITE_JOB_ID:-${BUILDKITE_PARALLEL_JOB:-local}}"
__omni_ci_job="$(__omni_ci_sanitize "${__omni_ci_job}" 2>/dev/null)"
__omni_ci_cache_root={root}
export TMPDIR="${__omni_ci_cache_root}/tmp"
export TORCHINDUCTOR_CACHE_DIR="${__omni_ci_cache_root}/torchinductor"
export TRITON_CACHE_DIR="${__omni_ci_cache_root}/triton"
export VLLM_CACHE_ROOT="${__omni_ci_cache_root}/vllm"
export XDG_CACHE_HOME="${__omni_ci_cache_root}/xdg"
export HF_DATASETS_CACHE="${__omni_ci_cache_root}/huggingface/datasets"
mkdir -p "${TMPDIR}" "${TORCHINDUCTOR_CACHE_DIR}" "${TRITON_CACHE_DIR}" \\
    "${VLLM_CACHE_ROOT}" "${XDG_CACHE_HOME}" "${HF_HOME}" "${HF_DATASETS_CACHE}\""""


def cache_dirs(prefix: str = "/tmp/vllm-omni-native-") -> str:
    """Per-job caches under `<prefix><job id>`, always overwritten; HF_HOME stays shared.

    The job id is BUILDKITE_JOB_ID, else BUILDKITE_PARALLEL_JOB, else `local`, with
    one `_` per code point outside [A-Za-z0-9_.-] (under C.UTF-8, in any locale).
    """
    return _CACHE_DIRS.replace("{root}", shlex.quote(prefix) + '"${__omni_ci_job}"')


# With VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE=1, HF_HOME must sit on a mount other than `/`.
PERSISTENT_HF_CACHE = """\
if [[ "${VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE:-0}" == "1" ]]; then
    if ! command -v findmnt >/dev/null 2>&1; then
        echo "Error: findmnt is required to verify the Hugging Face cache mount." >&2
        exit 1
    fi
    __omni_ci_mnt=$(findmnt -n -T "${HF_HOME}" -o TARGET 2>/dev/null || true)
    if [[ -z "${__omni_ci_mnt}" || "${__omni_ci_mnt}" == "/" ]]; then
        echo "Error: MI300 CI requires a persistent volume at or above ${HF_HOME}." >&2
        exit 1
    fi
fi"""

_TORCH_CHECK = """\
import os

import torch

expected = int(os.environ.get("VLLM_CI_EXPECTED_GPU_COUNT") or "1")
if not torch.version.hip:
    raise AssertionError("PyTorch is not a ROCm build")
if not torch.cuda.is_available():
    raise AssertionError("ROCm GPU is not available to PyTorch")
actual = torch.cuda.device_count()
if actual != expected:
    raise AssertionError(f"Expected {expected} ROCm GPU(s), found {actual}")
"""

# `rocminfo`, then torch: a ROCm build, available, exactly VLLM_CI_EXPECTED_GPU_COUNT
# GPUs (as GPU_COUNT, run before, read it). 0 is the no-GPU pre-flight (CPU-only
# steps, local runs): rocminfo and torch are skipped.
ROCM_GPUS = (
    "if (( 10#${__omni_ci_gpus} == 0 )); then\n"
    '    echo "VLLM_CI_EXPECTED_GPU_COUNT=0: no-GPU pre-flight, skipping rocminfo and the torch GPU check."\n'  # noqa: E501
    "else\n"
    "    rocminfo\n"
    "    python3 - <<'PY'\n" + _TORCH_CHECK + "PY\n"
    "fi"
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
        DOCKER_DISABLED,
        REQUIRE_COMMANDS,
        GPU_COUNT,  # an input: checked before the cache folders and HF_HOME are made
        section("Native in-pod ROCm CI"),
        cache_dirs(),
        PERSISTENT_HF_CACHE,
        ROCM_GPUS,
    ),
    run_all=True,
)

NPU = Semantics(
    platform="npu",
    # The legacy NPU image set this ENV; every NPU test YAML sets it too.
    defaults=(("VLLM_WORKER_MULTIPROC_METHOD", "spawn"),),
    preflight=(REQUIRE_COMMANDS, section("Ascend NPU tests")),
)

SEMANTICS: dict[Platform, Semantics] = {Platform.ROCM: ROCM, Platform.NPU: NPU}


def program_for(
    platform: Platform, environ: Mapping[str, str], positional: Sequence[str] = ()
) -> str:
    """The program `run-tests --platform <platform>` runs for this environment: on
    TEST_COMMANDS, else the positional words joined by single spaces (`"$*"`). The
    singular TEST_COMMAND is ignored, as in the original."""
    text = environ.get("TEST_COMMANDS") or " ".join(positional)
    return render_program(SEMANTICS[platform], text, secrets=secrets_from_env(environ))


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
    if chosen not in SEMANTICS:
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
