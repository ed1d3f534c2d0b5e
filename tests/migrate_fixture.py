"""A vLLM-Omni checkout whose old CI runs: the corpus, the old scripts, and what both lack.

Built at test time in a temporary git repo from ../shared/vllm-omni (the
`.buildkite/` corpus) overlaid with ../shared/vllm-omni-scripts (the original CI
scripts at their paths); nothing of either is copied into this repository.
Written here, because the two sets lack them:

* the seed-era AMD template (tests/fixtures/amd/test-template-amd-omni.j2, a
  reconstruction from the behaviour description);
* the seed-time one-step entry pipelines of CUDA and NPU (the corpus holds the
  older two-document design, which the seed-level uploader refuses);
* the Intel bootstrap, five lines from the behaviour description;
* `pyproject.toml` with the corpus's markers (tests/corpus.py), the one
  registry key the corpus lacks, a `.pre-commit-config.yaml` with the two hooks
  that migrate rewrites, the four Dockerfiles that must carry the pin, and
  stand-in files for the replaced pre-commit scripts and vLLM-Omni's tests of
  the replaced scripts (so that `--delete-replaced` has them to delete).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import ROOT, SHARED, need_shared
from tests.corpus import make_corpus
from tests.gitrepo import GitRepo

SCRIPTS = SHARED / "vllm-omni-scripts"
TEMPLATE = ROOT / "tests/fixtures/amd/test-template-amd-omni.j2"

ENTRY = """steps:
  - label: ":github: Resolve skip-ci (docs / skip marks) & upload pipeline"
    key: upload-ci-pipeline
    commands:
      - "python3 .buildkite/common/scripts/upload_pipeline.py --upload {steps}"
    agents:
      queue: "cpu_queue_premerge"
"""

INTEL_BOOTSTRAP = """#!/bin/bash
set -euo pipefail
# shellcheck disable=SC1091
source .buildkite/common/scripts/resolve_skip_ci.sh
gate_bootstrap_ci intel l2
echo "--- :hammer_and_wrench: Preparing Intel pipeline"
buildkite-agent pipeline upload .buildkite/intel/pipeline-intel.yml
"""

PRE_COMMIT = """\
# vLLM-Omni's pre-commit hooks (a comment that must stay)
default_install_hook_types: [pre-commit, commit-msg]

repos:
  - repo: https://github.com/astral-sh/ruff-pre-commit
    rev: v0.6.5
    hooks:
      - id: ruff
        args: &ruff-args [--fix, --exit-non-zero-on-fix]

  - repo: local
    hooks:
      # Every test file needs a level and a hardware marker.
      - id: check-mark
        name: Check test markers
        entry: python tools/pre_commit/check_test_marks.py
        language: python
        files: ^tests/

      - id: check-buildkite
        name: Check Buildkite pipelines
        entry: python tools/pre_commit/check_buildkite.py
        language: python
        additional_dependencies: [check-jsonschema]
        files: ^\\.buildkite/  # every pipeline YAML

      - id: check-spdx-header
        name: Check SPDX headers
        entry: python tools/pre_commit/check_spdx_header.py
        language: python
        args: *ruff-args
"""

DOCKERFILES = {
    "docker/Dockerfile.rocm": (
        "FROM rocm/vllm-dev:base AS deps\nRUN pip install -r requirements/rocm.txt\n\n"
        "FROM deps AS test\nCOPY . /app/vllm-omni\n"
    ),
    "docker/Dockerfile.ci": (
        "FROM vllm/vllm-openai:v0.31.0 AS deps\nRUN pip install -r requirements/cuda.txt\n\n"
        "FROM deps AS test\nCOPY . /workspace\n"
    ),
    "docker/Dockerfile.npu.ci": (
        "FROM quay.io/ascend/vllm-ascend:v0.31.0\nCOPY . /workspace\nRUN pip install -e .\n"
    ),
    "docker/Dockerfile.xpu": "FROM intel/vllm:xpu\nCOPY . /workspace\nRUN pip install -e .\n",
}

STAND_IN_FILES = (
    "tools/pre_commit/check_test_marks.py",
    "tools/pre_commit/check_buildkite.py",
    "tools/pre_commit/check_spdx_header.py",
    "tests/buildkite/test_skip_ci.py",
    "tests/buildkite/test_upload_pipeline.py",
    "tests/buildkite/test_amd_suite_selection.py",
)


def make_checkout(path: Path) -> GitRepo:
    """The un-migrated checkout at `path`: one commit on `main`, pushed to its origin."""
    repo = GitRepo.create(path)
    make_corpus(path)
    scripts = need_shared(SCRIPTS)
    for source in sorted(scripts.rglob("*")):
        if source.is_file() and source.name != "README.md":
            target = path / source.relative_to(scripts)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    files = {
        ".buildkite/cuda/pipeline.yml": ENTRY.format(
            steps=".buildkite/cuda/bootstrap-upload-steps.yml"
        ),
        ".buildkite/npu/pipeline-npu.yml": ENTRY.format(
            steps=".buildkite/npu/bootstrap-upload-steps.yml"
        ),
        ".buildkite/intel/scripts/bootstrap-intel-omni.sh": INTEL_BOOTSTRAP,
        ".pre-commit-config.yaml": PRE_COMMIT,
        "docs/README.md": "# vLLM-Omni docs\n",
        **DOCKERFILES,
        **{name: "# stand-in for vLLM-Omni's file\n" for name in STAND_IN_FILES},
    }
    if TEMPLATE.is_file():
        files[".buildkite/amd/test-template-amd-omni.j2"] = TEMPLATE.read_text()
    for rel, text in files.items():
        repo.write(rel, text)
    for script in path.rglob("*.sh"):
        script.chmod(0o755)
    repo.commit("vLLM-Omni at the seed level")
    repo.push("main")
    return repo
