"""`plan`: what CI will run for a change, on every platform, with no side effects.

One diff (`ci.diff`), one skip-ci decision (`ci.skipci`), then each platform's
own bootstrap and upload code says what it would upload (`ci.plan.platforms`).
It never uploads, calls `buildkite-agent` or uses the network (PR labels come
from `--labels`). The JSON form is documented in `ci/data/plan.schema.json`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ci import door
from ci.errors import FAILURE, Stop
from ci.plan.build import make_plan
from ci.plan.output import write

if TYPE_CHECKING:
    from ci.plan.inputs import PlanInputs
    from ci.plan.model import BuildPlan


def run(inputs: PlanInputs) -> BuildPlan:
    """Make and print the plan; exit 1 (after printing) when a platform failed."""
    plan = make_plan(inputs)
    if inputs.format != "table":  # the table shows them; JSON and markdown go to tools
        for warning in plan.warnings:
            door.note(f"warning: {warning}")
    write(plan, inputs.format, sys.stdout)
    if plan.failed:
        failed = ", ".join(p.platform for p in plan.platforms if p.status == "error")
        raise Stop(FAILURE, f"error: plan failed for {failed} (see above)")
    return plan
