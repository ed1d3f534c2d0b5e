"""The XPU test commands: the one table the XPU runner and the XPU tier both read.

From the last step of `.buildkite/intel/scripts/run-xpu-test.sh`: in the
image's checkout, four pytest runs in order, stopping at the first failure.
Edit the selection here and both the container runner and `nox` follow.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

WORKDIR = "/workspace/vllm-omni"
XPU_TEST_PATHS = ("tests/diffusion", "tests/dfx", "tests/e2e")
# The script installs this in the container before testing (pytest-xdist tracebacks).
SETUP = ("pip", "install", "tblib==3.1.0")


@dataclass(frozen=True)
class XpuRun:
    """One pytest run of the XPU job."""

    name: str
    argv: tuple[str, ...]

    def line(self) -> str:
        return " ".join(_quote(a) for a in self.argv)


def _quote(word: str) -> str:
    """Shell quoting as the script wrote it: `-m "core_model and xpu and B60"`."""
    if shlex.quote(word) == word:
        return word
    if not any(c in word for c in '$`"\\!'):
        return f'"{word}"'
    return shlex.quote(word)


def _pytest(*args: str) -> tuple[str, ...]:
    return ("pytest", "-v", "-s", *args)


RUNS: tuple[XpuRun, ...] = (
    XpuRun("core", _pytest(*XPU_TEST_PATHS, "-m", "core_model and xpu and B60")),
    XpuRun("mxfp8", _pytest("tests/diffusion/quantization/test_mxfp8_config.py")),
    XpuRun("advanced", _pytest(*XPU_TEST_PATHS, "-m", "advanced_model and xpu and B60")),
    XpuRun("omni", _pytest(*XPU_TEST_PATHS, "-m", "omni and xpu and B60")),
)


def command_lines() -> tuple[str, ...]:
    """The container's command text, line by line, as the script ran it."""
    return (
        'echo "${ZE_AFFINITY_MASK:-}"',
        shlex.join(SETUP),
        f"cd {shlex.quote(WORKDIR)}",
        *(run.line() for run in RUNS),
    )
