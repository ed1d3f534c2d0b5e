"""`plan`: what CI will run for this change on every platform, before pushing."""

from __future__ import annotations

from invoke.context import Context

from ci.taskkit import task

__all__ = ["plan"]


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
        "repo": "target checkout (default: git top-level of the current directory)",
        "format": "table (default), json or markdown",
    },
)
def plan(
    c: Context,
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

    Per platform: the skip-ci decision, the pipelines its bootstrap would upload,
    every job (hardware, parallelism, timeout, blocking) and every dropped step
    with its reason, computed by the bootstraps' own code for a PR build of
    <base>...<head> (on main: a push to main, against the head's parent), the
    build every task assumes locally. No upload, no buildkite-agent, no
    network. Exit 0 when printed; 1 when a platform's render failed (the others
    are still printed); 2 on bad input. JSON schema and details: docs/plan.md.
    """
    # Every option by its own name: parse_inputs takes exactly these.
    options = {name: value for name, value in locals().items() if name != "c"}
    import os

    from ci.plan import run
    from ci.plan.inputs import parse_inputs

    run(parse_inputs(os.environ, **options))
