"""`bootstrap`: the first job of every platform's pipeline (rocm: ci.amd.bootstrap;
cuda, npu, xpu: ci.bootstraps)."""

from __future__ import annotations

from ci.taskdef import task


@task(
    replaces=(
        "bootstrap-amd-omni.sh",
        "bootstrap-intel-omni.sh",
        "upload_pipeline.py (bootstrap mode)",
    ),
    help={
        "platform": "rocm (amd), cuda, npu or xpu (intel); required",
        "dry_run": "upload nothing; print the pipeline YAML alone on stdout",
        "labels": "rocm only: the PR's labels, comma-separated ('' for none), instead of "
        "$BUILDKITE_PULL_REQUEST_LABELS or the GitHub API",
    },
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
    if chosen is Platform.ROCM:
        from ci.amd import bootstrap as amd

        amd.run(resolve_repo(repo), dry_run=dry_run, labels=labels)
        return
    from ci.bootstraps import run

    run(chosen, resolve_repo(repo), dry_run=dry_run)
