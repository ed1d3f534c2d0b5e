"""`upload-pipeline` and `lint-pipelines`: the uploader of test pipelines, and its linter;
and the other gates over a target checkout: `check-marks` and `shellcheck-steps`.

Named apart from this repository's own `lint` / `shellcheck` / `mypy` sessions:
these check vLLM-Omni (`--repo`), not vllm-omni-ci.
"""

from __future__ import annotations

from collections.abc import Sequence

from ci.taskdef import task


@task(
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


@task()
def lint_pipelines(repo: str = "") -> None:
    """Check every test YAML: keys, presets, expansion and schema, whatever the diff.

    Replaces the check-buildkite pre-commit hook: CUDA/NPU test YAMLs rendered under
    MIRROR_HW unset and b200, every other .buildkite/ YAML schema-checked. One
    `ok`/`FAIL` line per file on stdout; exit 1 on problems, 2 on bad input.
    """
    from ci.pipeline.lint import lint_repo

    lint_repo(repo)


@task(
    help={
        "from_ref": "check only the tests/ files changed since this git revision",
    }
)
def check_marks(
    repo: str = "", from_ref: str = "", to_ref: str = "", words: Sequence[str] = ()
) -> None:
    """Every test file has a CI level and a hardware marker, and no direct SKU marker.

    A static scan of the files after `--` (default: every .py under tests/).
    Problems go to stdout, grouped per file; exit 1 on problems, 2 on bad input.
    """
    from ci.gates.marks import check_marks as run

    run(repo, words, from_ref=from_ref, to_ref=to_ref)


@task(
    help={
        "severity": "lowest shellcheck level reported: error, warning, info or style (default)",
        "exclude": "codes to ignore, comma-separated (e.g. SC2086,SC2046,upload-expansion)",
        "dry_run": "print the shellcheck command and run nothing",
        "from_ref": "check only the pipeline YAMLs changed since this git revision",
    }
)
def shellcheck_steps(
    repo: str = "",
    severity: str = "style",
    exclude: str = "",
    dry_run: bool = False,
    from_ref: str = "",
    to_ref: str = "",
    words: Sequence[str] = (),
) -> None:
    """shellcheck the commands of every pipeline step, in the shell dialect it runs under.

    YAML files after `--` limit the check (default: every pipeline under
    .buildkite/); `$$` is the job shell's `$`. Exit 1 on findings or a pipeline its
    consumer refuses; 2 on bad input or when shellcheck is missing.
    """
    options = {name: value for name, value in locals().items() if name not in ("repo", "words")}
    from ci.gates.shellsteps import shellcheck_steps as run

    run(repo, words, **options)
