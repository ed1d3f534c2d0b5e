"""`plan`'s computation: the inputs checked, one diff, one skip-ci decision, each platform."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ci import diff as diffs
from ci import door, skipci
from ci.errors import FAILURE, Stop, TaskError, close_match
from ci.migrate.edits import old_calls
from ci.plan import platforms
from ci.plan.model import BuildPlan, PlatformPlan
from ci.plan.output import write
from ci.plan.platforms import Situation, bootstrap_labels
from ci.plan.snapshot import files_at, require_pipelines, shown

if TYPE_CHECKING:
    from ci.plan.inputs import PlanInputs


def run(inputs: PlanInputs) -> BuildPlan:
    """Make and print the plan; exit 1 (after printing) when a platform failed."""
    plan = make_plan(inputs)
    if inputs.format != "table":  # the table shows them; JSON and markdown go to tools
        for warning in plan.warnings:
            door.note(f"warning: {warning}")
    write(plan, inputs.format, sys.stdout)
    failed = ", ".join(p.platform for p in plan.platforms if p.status == "error")
    if failed:
        raise Stop(FAILURE, f"error: plan failed for {failed} (see above)")
    return plan


# Each fills in its platform's plan; one that raises leaves only its errors.
PLANNERS: dict[str, Callable[[Situation, PlatformPlan], None]] = {
    "rocm": platforms.plan_rocm,
    "cuda": platforms.plan_upload,
    "npu": platforms.plan_upload,
    "xpu": platforms.plan_xpu,
}


def make_plan(inputs: PlanInputs) -> BuildPlan:
    head = diffs.WORKTREE if inputs.worktree else (inputs.head or "HEAD")
    base = inputs.base or _default_base(inputs)
    diff = diffs.resolve_diff(inputs.repo, base, head)
    decision = skipci.decision_for(diff)
    rev = None if inputs.worktree else (inputs.head or "HEAD")
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
    with files_at(inputs.repo, rev) as files:
        require_pipelines(files, inputs.repo, rev)
        plan.old_calls = old_calls(files)
        plan.migrated = not plan.old_calls
        situation = Situation(inputs, diff, decision, bootstrap_labels(), files=files)
        for platform in inputs.platforms:
            made = PlatformPlan(platform.value, skip_ci=situation.skip_words(platform.value))
            try:
                PLANNERS[platform.value](situation, made)
            except TaskError as exc:
                made = PlatformPlan(
                    made.platform, "error", skip_ci=made.skip_ci, errors=list(exc.problems)
                )
            made.errors = [shown(e, files, inputs.repo, rev) for e in made.errors]
            for pipeline in made.pipelines:
                pipeline.reason = shown(pipeline.reason, files, inputs.repo, rev)
            if made.errors:
                made.status, made.reason = "error", made.errors[0]
            plan.platforms.append(made)
    plan.warnings += [
        unused_label(label, sorted(situation.known_labels))
        for label in inputs.labels
        if label not in situation.known_labels
    ]
    return plan


def unused_label(label: str, known: list[str]) -> str:
    """The warning for a label no pipeline tests, with a guess for a typo (`redy`)."""
    guess = close_match(label, known)
    hint = f"; did you mean {guess!r}?" if guess else ""
    listed = ", ".join(known) or "none"
    return f"label {label!r} is not used by any pipeline{hint} (known: {listed})"


def _default_base(inputs: PlanInputs) -> str:
    """As the real build would diff: a PR against `origin/main`, a main build against its
    parent (the merge-base with `origin/main` would be the commit itself: an empty diff)."""
    if inputs.branch == "main" and not inputs.worktree:
        parent = diffs.main_build_base(inputs.repo, inputs.head or "HEAD")
        if parent is not None:
            return parent
    return diffs.default_base(inputs.repo, env={})
