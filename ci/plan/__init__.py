"""`plan`: what CI will run for a change, on every platform, with no side effects.

`run(inputs)` resolves the diff once (`ci.diff`), takes the skip-ci decision
once (`ci.skipci`), asks each platform's own bootstrap and upload code what it
would upload (`ci.plan.platforms`), and prints the result (`ci.plan.output`).
It never uploads, never calls `buildkite-agent` and never uses the network:
the PR labels come from `--labels`. The JSON form is versioned and documented
(`ci/data/plan.schema.json`, docs/plan.md).
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
