"""The XPU ready tier: the one job of `.buildkite/intel/pipeline-intel.yml`.

Its commands are the XPU runner's table (`ci.runner.xpu.COMMANDS`), the one
source the container runner uses too; only the job's Buildkite settings are here.
"""

from __future__ import annotations

from ci.platforms import Platform
from ci.runner.xpu import COMMANDS
from ci.tiers.rules import SoftFail, cpu_runnable
from ci.tiers.step import Tier, TierStep

XPU_SOURCE = "ci/runner/xpu.py (the XPU runner's command table)"


def xpu_steps(tier: Tier) -> list[TierStep]:
    commands = COMMANDS
    return [
        TierStep(
            platform=Platform.XPU,
            tier=tier,
            label="Intel: XPU Test",
            commands=commands,
            group="INTEL Tests",
            timeout_minutes=60,
            soft_fail=SoftFail(),
            hardware="intel-gpu-omni",  # the queue
            runs_on_cpu=cpu_runnable(commands),
            source=XPU_SOURCE,
            yaml_escaped=False,
        )
    ]
