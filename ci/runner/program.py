"""Each platform's job shell (`SHELLS`) and the whole bash program a test job runs in it.

A program, not Python, so the same text runs on an agent and in any test image
without vllm-omni-ci. In order: `set -euo pipefail` and the commands as one quoted
literal; env defaults (when unset *or empty*), forced values, exports; the
pre-flight; the masked `Commands:` line; the commands in a child bash; the exit
mapping. Run-time facts (job id, GPU count) come from its env.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ci.platforms import Platform
from ci.redact import MASK, Redactor, is_secret_name

COMMANDS_VAR = "__omni_ci_commands"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# A pre-flight check is a bash fragment that exits non-zero to stop the job.
def refuse(test: str, message: str) -> str:
    """bash: when `test` holds, say `message` on stderr and exit 1."""
    return f"if [[ {test} ]]; then\n    echo {shlex.quote(message)} >&2\n    exit 1\nfi"


def section(title: str) -> str:
    """A Buildkite log section header (`--- title`)."""
    return f"echo {shlex.quote('--- ' + title)}"


# An empty command text is an error (exit 1), not a silent success.
REQUIRE_COMMANDS = refuse(f'-z "${{{COMMANDS_VAR}}}"', "Error: No test commands provided.")


@dataclass(frozen=True)
class Semantics:
    """What a platform's job shell does around the commands."""

    platform: str
    defaults: tuple[tuple[str, str], ...] = ()  # set when unset or empty, then exported
    forced: tuple[tuple[str, str], ...] = ()  # exported, over the job's environment
    preflight: tuple[str, ...] = ()
    # True: run-amd-test.sh's shell: every line runs and the first failure is kept
    # (a real failure replaces pytest's 5; `exit N` and `set -e` fold in), pipefail
    # on, and VLLM_CI_ALLOW_NO_TESTS=1 (exactly) turns a final 5 into 0.
    # False: Buildkite's default job shell, `bash -e -c`: stop at the first failure.
    run_all: bool = False


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


# Each platform's job shell, the one table of `run-tests` and the tiers. ROCm replaces
# run-amd-test.sh (MI300 pods, no Docker); the others are Buildkite's `bash -e -c`, NPU
# with the env default the legacy NPU image set (every NPU test YAML sets it too).
SHELLS: dict[Platform, Semantics] = {
    Platform.ROCM: Semantics(
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
    ),
    Platform.CUDA: Semantics("cuda", preflight=(REQUIRE_COMMANDS, section("CUDA tests"))),
    Platform.NPU: Semantics(
        "npu",
        defaults=(("VLLM_WORKER_MULTIPROC_METHOD", "spawn"),),
        preflight=(REQUIRE_COMMANDS, section("Ascend NPU tests")),
    ),
    Platform.XPU: Semantics("xpu", preflight=(REQUIRE_COMMANDS, section("Intel XPU tests"))),
}


# The ERR trap keeps the first failure, but a real failure replaces pytest's 5;
# the EXIT trap folds the shell's own end status (`exit N`, `set -e`) in too.
_RUN_ALL_CHILD = """\
set -E
__omni_ci_status=0
__omni_ci_merge() {
    local status=$1
    if (( status != 0 && (__omni_ci_status == 0 || (__omni_ci_status == 5 && status != 5)) )); then
        __omni_ci_status=${status}
    fi
}
trap '__omni_ci_merge "$?"' ERR
trap '__omni_ci_merge "$?"; exit "${__omni_ci_status}"' EXIT
eval "$1"
exit "${__omni_ci_status}"
"""

_NO_TESTS = """\
if [[ ${__omni_ci_exit} -eq 5 && "${VLLM_CI_ALLOW_NO_TESTS:-0}" == "1" ]]; then
    echo 'Pytest collected no tests; VLLM_CI_ALLOW_NO_TESTS=1, treating exit code 5 as success.'
    exit 0
fi"""

_ASSIGNMENT = re.compile(
    r"(?P<name>\b[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\"[^\"]*\"|'[^']*'|[^\s;&|)]+)"
)


def shown_commands(text: str, secrets: Iterable[str] = ()) -> str:
    """The command text as logged: secret values and secret-named assignments masked
    (`export HF_TOKEN=[REDACTED]`; a reference like `HF_TOKEN="$VLLM_CI_HF_TOKEN"` stays)."""

    def mask(match: re.Match[str]) -> str:
        value = match.group("value").strip("\"'")
        if is_secret_name(match.group("name")) and value and not value.startswith("$"):
            return f"{match.group('name')}={MASK}"
        return match.group(0)

    return _ASSIGNMENT.sub(mask, Redactor(secrets)(text))


def render_program(
    semantics: Semantics, commands: str | Sequence[str], *, secrets: Iterable[str] = ()
) -> str:
    """The complete bash program for one job; a pure function of its arguments.

    `commands` (text, or lines) run in a child bash as `semantics.run_all` says;
    `secrets` are masked in the `Commands:` line. The program holds the text twice
    and one argv string may not exceed 128 KiB: a long one runs as `bash FILE`
    (`ci.runner.native`).
    """
    text = commands if isinstance(commands, str) else "\n".join(commands)
    bad = [n for n, _ in (*semantics.defaults, *semantics.forced) if not _NAME.match(n)]
    if bad:
        raise ValueError(f"not valid environment variable names: {', '.join(bad)}")
    if semantics.run_all:
        child = f'-o pipefail -c {shlex.quote(_RUN_ALL_CHILD)} _ "${{{COMMANDS_VAR}}}"'
    else:
        child = f'-e -c "${{{COMMANDS_VAR}}}"'

    out = [
        "#!/usr/bin/env bash",
        # For the whole file: command text and child script are single-quoted on purpose.
        "# shellcheck disable=SC2016",
        f"# Rendered by vllm-omni-ci (ci/runner/program.py) for {semantics.platform}.",
        "set -euo pipefail",
        f"{COMMANDS_VAR}={shlex.quote(text)}",
    ]
    for name, value in semantics.defaults:
        out += [f'[[ -n "${{{name}:-}}" ]] || {name}={shlex.quote(value)}', f"export {name}"]
    out += [f"export {name}={shlex.quote(value)}" for name, value in semantics.forced]
    out += semantics.preflight
    out += [
        f"printf '%s\\n' {shlex.quote('Commands:' + shown_commands(text, secrets))}",
        f'if "${{BASH:-/bin/bash}}" {child}; then\n    exit 0\nelse\n    __omni_ci_exit=$?\nfi',
    ]
    if semantics.run_all:
        out.append(_NO_TESTS)
    out.append('exit "${__omni_ci_exit}"')
    return "\n".join(out) + "\n"
