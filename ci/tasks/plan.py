"""`plan`: what CI will run for this change on every platform, before pushing (ci.plan)."""

from __future__ import annotations

from ci.taskdef import task


@task(
    iterable=["platform"],
    help={
        "base": "base revision (default: merge-base with origin/main, else main, or with "
        "$BUILDKITE_PULL_REQUEST_BASE_BRANCH; with --branch main, the head's parent, as a "
        "main build diffs)",
        "head": "head revision (default: HEAD)",
        "worktree": "compare the working tree instead of --head (uncommitted work counts)",
        "labels": "PR labels, separated by commas or newlines (default: "
        "$BUILDKITE_PULL_REQUEST_LABELS; never fetched from GitHub)",
        "branch": "the build's branch (default: $BUILDKITE_BRANCH, else the checkout's; "
        "main plans a push to main, any other a PR against main)",
        "nightly": "plan a scheduled build with NIGHTLY=1",
        "weekly": "plan a scheduled build with WEEKLY=1",
        "non_critical": "plan a scheduled build with NON_CRITICAL=1",
        "mirror_hw": "MIRROR_HW for the CUDA pipelines: empty or b200",
        "platform": "rocm (amd), cuda, npu, xpu (intel); repeat or comma-separate (default: all)",
        "format": "table (default), json or markdown",
    },
)
def plan(
    base: str = "",
    head: str = "",
    worktree: bool = False,
    labels: str = "",
    branch: str = "",
    nightly: bool = False,
    weekly: bool = False,
    non_critical: bool = False,
    mirror_hw: str = "",
    platform: list[str] | None = None,
    repo: str = "",
    format: str = "table",
) -> None:
    """Show what CI would run for this change on every platform; uploads nothing.

    Per platform: the skip-ci decision, the pipelines its bootstrap would upload, and
    every job and dropped step, by the bootstraps' own code; no upload, no network.
    Exit 1 when a platform's render failed (the others still print); 2 on bad
    input. Details: docs/plan.md.
    """
    # Every option by its own name: parse_inputs takes exactly these.
    options = {name: value for name, value in locals().items()}
    import os

    from ci.plan.inputs import parse_inputs
    from ci.plan.make import run

    run(parse_inputs(os.environ, **options))
