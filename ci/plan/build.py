"""Make the plan: one diff, one skip-ci decision, then every platform's planner.

The range goes to the diff resolver as a PR build (`--worktree` adds
uncommitted work); pipelines are read at the head of that range
(`ci.plan.snapshot`). A platform whose render fails keeps its error and the
others are still planned; bad input stops everything first (exit 2).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ci import diff as diffs
from ci import skipci
from ci.errors import UserError
from ci.plan import platforms
from ci.plan.model import BuildPlan, PlatformPlan
from ci.plan.platforms import Situation, bootstrap_labels
from ci.plan.snapshot import files_at, shown

if TYPE_CHECKING:
    from ci.diff import Diff
    from ci.plan.inputs import PlanInputs
    from ci.skipci import Decision


def _planners() -> dict[str, Callable[[Situation], PlatformPlan]]:
    return {
        "rocm": platforms.plan_rocm,
        "cuda": lambda s: platforms.plan_upload(s, "cuda"),
        "npu": lambda s: platforms.plan_upload(s, "npu"),
        "xpu": platforms.plan_xpu,
    }


def make_plan(inputs: PlanInputs) -> BuildPlan:
    head = diffs.WORKTREE if inputs.worktree else (inputs.head or "HEAD")
    base = inputs.base or _default_base(inputs)
    diff = diffs.resolve_diff(inputs.repo, base, head)
    decision = skipci.decision_for(diff)
    rev = None if inputs.worktree else (inputs.head or "HEAD")
    with files_at(inputs.repo, rev) as files:
        return _plan(inputs, base, diff, decision, files, rev)


def _default_base(inputs: PlanInputs) -> str:
    """As the real build would diff: a PR against `origin/main`, a main build against its
    parent (the merge-base with `origin/main` would be the commit itself: an empty diff)."""
    if inputs.branch == "main" and not inputs.worktree:
        parent = diffs.main_build_base(inputs.repo, inputs.head or "HEAD")
        if parent is not None:
            return parent
    return diffs.default_base(inputs.repo, env={})


def _plan(
    inputs: PlanInputs, base: str, diff: Diff, decision: Decision, files: Path, rev: str | None
) -> BuildPlan:
    situation = Situation(inputs, diff, decision, bootstrap_labels(), files=files)
    plan = BuildPlan(
        repo=str(inputs.repo),
        diff={
            "range": diff.range,
            "reason": diff.reason,
            "paths": None if diff.paths is None else list(diff.paths),
        },
        inputs={**inputs.as_dict(), "base": base},
        skip_ci=decision.as_dict(),
    )
    planners = _planners()
    for platform in inputs.platforms:
        try:
            made = planners[platform.value](situation)
        except UserError as exc:
            made = PlatformPlan(platform.value, status="error", errors=list(exc.problems))
            made.skip_ci = situation.skip_words(platform.value)
        made.errors = [shown(e, files, inputs.repo, rev) for e in made.errors]
        for pipeline in made.pipelines:
            pipeline.reason = shown(pipeline.reason, files, inputs.repo, rev)
        if made.errors:
            made.status, made.reason = "error", made.errors[0]
        plan.platforms.append(made)
    known = ", ".join(sorted(situation.known_labels)) or "none"
    plan.warnings += [
        f"label {label!r} is not used by any pipeline (known: {known})"
        for label in inputs.labels
        if label not in situation.known_labels
    ]
    return plan
