"""The XPU ready tier: the one job of `.buildkite/intel/pipeline-intel.yml`.

Its commands come from the XPU runner's table (`ci.runner.xpu_commands`), the
single source the container runner uses too; only the job's Buildkite
settings (label, queue, timeout, soft_fail: false) are named here.
"""

from __future__ import annotations

from ci.platforms import Platform
from ci.runner.xpu_commands import WORKDIR, command_lines
from ci.tiers.rules import SoftFail, cpu_runnable
from ci.tiers.step import Tier, TierStep

LABEL = "Intel: XPU Test"
QUEUE = "intel-gpu-omni"
TIMEOUT_MINUTES = 60
XPU_SOURCE = "ci/runner/xpu_commands.py (the XPU runner's command table)"


def xpu_steps(tier: Tier) -> list[TierStep]:
    commands = tuple(command_lines())
    return [
        TierStep(
            platform=Platform.XPU,
            tier=tier,
            label=LABEL,
            commands=commands,
            group="INTEL Tests",
            timeout_minutes=TIMEOUT_MINUTES,
            soft_fail=SoftFail(),
            hardware=QUEUE,
            runs_on_cpu=cpu_runnable(commands),
            source=XPU_SOURCE,
            yaml_escaped=False,
        )
    ]


def workdir() -> str:
    return WORKDIR
