"""`bootstrap`: the first job of every platform's Buildkite pipeline; and its parts alone:
`skip-ci` (may this build stop before its L2/L3 tests? replaces `skip_ci.py gate`) and
`select-suites` (the AMD suite selector); and `plan`: what CI will run for this change on
every platform, before pushing."""

from __future__ import annotations

import sys

from ci.taskdef import task


@task(
    help={
        "platform": "rocm (amd), cuda, npu or xpu (intel); required",
        "dry_run": "upload nothing; print the pipeline YAML alone on stdout",
        "labels": "rocm only: the PR's labels, comma-separated ('' for none), instead of "
        "$BUILDKITE_PULL_REQUEST_LABELS or the GitHub API",
    }
)
def bootstrap(
    platform: str = "",
    repo: str = "",
    dry_run: bool = False,
    labels: str | None = None,
) -> None:
    """Decide what this build runs and upload the test pipeline (replaces bootstrap-*.sh).

    rocm (bootstrap-amd-omni.sh): the AMD suites from the PR labels (--labels, else
    BUILDKITE_PULL_REQUEST_LABELS, else the GitHub API; --dry-run never asks
    GitHub), NIGHTLY and DEBUG_TEST_YAML, each gated by skip-ci. cuda, npu:
    .buildkite/<platform>/bootstrap-upload-steps.yml with its skip-ci `if` gates.
    xpu (bootstrap-intel-omni.sh): skip-ci `intel l2`, then
    .buildkite/intel/pipeline-intel.yml. Every pipeline is schema-checked before the
    upload. Exit 1 on a render, schema, label or selector error; a failed upload
    gives buildkite-agent's code; bad input exits 2.
    """
    from ci.errors import UserError
    from ci.platforms import ALLOWED, Platform, platform_option
    from ci.target import resolve_repo

    if not platform:
        raise UserError(f"--platform is required: {ALLOWED}")
    chosen = platform_option(platform)
    if labels is not None and chosen is not Platform.ROCM:
        raise UserError(
            f"--labels: only for --platform rocm; the {chosen.value} bootstrap uploads `if`"
            " conditions that Buildkite evaluates against the PR's labels itself"
        )
    from ci.bootstraps import run

    run(chosen, resolve_repo(repo), dry_run=dry_run, labels=labels)


@task(
    help={
        "platform": "rocm (amd), cuda, npu or xpu (intel); required",
        "level": "l2 (ready) or l3 (merge); required",
    }
)
def skip_ci(platform: str = "", level: str = "", repo: str = "") -> None:
    """Exit 0 with `skip-all` or `skip-l23` on stdout to stop; exit 1 to run the tests.

    The range comes from git and the Buildkite env, as README's "Which build" says;
    the decision and its reason go to stderr. Bad input exits 2, no git 127;
    callers treat both as "run".
    """
    from ci import skipci

    skipci.run_gate(platform, level, repo)


@task(
    help={
        "branch": "the build's branch, required (main selects merge, or nightly with --nightly 1;"
        " any other value, empty included, follows the labels)",
        "labels": "PR labels, separated by newlines or commas",
        "debug_test_yaml": "explicit comma list of suites (ready, merge, nightly); wins over all",
        "nightly": "0 or 1 (only matters on main)",
    }
)
def select_suites(
    branch: str | None = None,
    labels: str = "",
    debug_test_yaml: str = "",
    nightly: str = "0",
) -> None:
    """Print the AMD suites to run as NAME:file lines, like select_test_suites.py.

    Reads only its options; `--branch ""` is a branch that is not main. Bad input
    exits 2 with select_test_suites.py's messages.
    """
    from ci.amd import suites

    selection = suites.select_from_args(branch, labels, debug_test_yaml, nightly)
    if selection.notice:
        print(selection.notice, file=sys.stderr)
    for suite in selection.suites:
        print(suite.spec)


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
