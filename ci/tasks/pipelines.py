"""`upload-pipeline` and `lint-pipelines`: the uploader of test pipelines, and its linter."""

from __future__ import annotations

from invoke.context import Context

from ci.taskkit import task


@task(
    positional=["pipeline"],
    help={
        "pipeline": "pipeline YAML, relative to the repo root (.buildkite/cuda/test-ready.yml)",
        "scope": "diff (default: filter by the build's diff), all, e2e, or auto",
        "all": "alias of --scope all: no source filtering",
        "e2e": "alias of --scope e2e: only groups named '… E2E Test …', unfiltered",
        "upload": "pipe the YAML to `buildkite-agent pipeline upload` instead of printing it",
        "dry_run": "print the YAML and the upload command; upload nothing",
        "platform": "bootstrap-upload-steps.yml only: cuda or npu (default: npu when a "
        "path component is `npu`, else cuda)",
    },
)
def upload_pipeline(
    c: Context,
    pipeline: str,
    scope: str = "",
    all: bool = False,
    e2e: bool = False,
    upload: bool = False,
    dry_run: bool = False,
    repo: str = "",
    platform: str = "",
) -> None:
    """Render a test pipeline (source filter, hardware presets), validate it, print or upload.

    Replaces `upload_pipeline.py [--upload] [--all|--e2e] FILE`: steps whose
    source_file_dependencies the diff does not touch are dropped, hardware presets
    expanded (MIRROR_HW=b200 reroutes), the result schema-checked; a
    bootstrap-upload-steps.yml gets the skip-ci `if` gates. Problems exit 1 and
    upload nothing; a failed upload gives buildkite-agent's code; bad options exit 2.
    """
    from ci.pipeline import scope as scopes
    from ci.pipeline.upload import UploadOptions
    from ci.pipeline.upload import upload_pipeline as run

    run(
        UploadOptions(
            pipeline=pipeline,
            scope=scopes.choose(scope, all, e2e),
            upload=upload,
            dry_run=dry_run,
            repo=repo,
            platform=platform,
        )
    )


@task()
def lint_pipelines(c: Context, repo: str = "") -> None:
    """Check every test YAML: keys, presets, expansion and schema, whatever the diff.

    Replaces the check-buildkite pre-commit hook: CUDA/NPU test YAMLs rendered under
    MIRROR_HW unset and b200, every other .buildkite/ YAML schema-checked. One
    `ok`/`FAIL` line per file on stdout; exit 1 on problems, 2 on bad input.
    """
    from ci.pipeline.lint import lint_repo

    lint_repo(repo)
