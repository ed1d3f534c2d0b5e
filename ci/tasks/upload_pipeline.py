"""`upload-pipeline`: the uploader of test pipelines (was upload_pipeline.py;
ci.pipeline.upload)."""

from __future__ import annotations

from ci.taskdef import task


@task(
    replaces=("upload_pipeline.py (test mode)",),
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
    options = {k: v for k, v in locals().items() if k not in ("scope", "all", "e2e")}
    from ci.pipeline import scope as scopes
    from ci.pipeline.upload import UploadOptions
    from ci.pipeline.upload import upload_pipeline as run

    run(UploadOptions(**options, scope=scopes.choose(scope, all, e2e)))
