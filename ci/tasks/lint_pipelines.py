"""`lint-pipelines`: the uploader's checks over every test YAML (ci.pipeline.lint). Named apart
from this repository's own `lint` session: it checks vLLM-Omni (`--repo`), not vllm-omni-ci."""

from __future__ import annotations

from ci.taskdef import task


@task(replaces=("check_buildkite.py (pre-commit hook check-buildkite)",))
def lint_pipelines(repo: str = "") -> None:
    """Check every test YAML: keys, presets, expansion and schema, whatever the diff.

    Replaces the check-buildkite pre-commit hook: CUDA/NPU test YAMLs rendered under
    MIRROR_HW unset and b200, every other .buildkite/ YAML schema-checked. One
    `ok`/`FAIL` line per file on stdout; exit 1 on problems, 2 on bad input.
    """
    from ci.pipeline.lint import lint_repo

    lint_repo(repo)
