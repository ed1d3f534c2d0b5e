"""A fixture target for tier runs: the sample's tests with a small AMD ready tier of our own.

The tier echoes the job environment a step sees (shards, file and step env,
GPU count, working directory), has a failing blocking step, and a passing
step after it, so `--keep-going` and the exit status can be checked.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SAMPLE
from tests.gitrepo import copy_tracked

TIER = """\
env:
  FILE_LEVEL: from-file
steps:
  - group: ":card_index_dividers: Fixture"
    steps:
      - label: "Env · Shard %N/%t"
        agent_pool: mi300_1
        parallelism: 2
        mirror_hardwares: [amdproduction]
        grade: Blocking
        timeout_in_minutes: 5
        env:
          STEP_LEVEL: from-step
        commands:
          - >-
            echo "tier-env job=$$BUILDKITE_PARALLEL_JOB count=$$BUILDKITE_PARALLEL_JOB_COUNT
            file=$$FILE_LEVEL step=$$STEP_LEVEL gpus=$$VLLM_CI_EXPECTED_GPU_COUNT
            pwd=$$(pwd) tmpdir=$$TMPDIR"
          - >-
            pytest -q tests/model_executor -m 'core_model and cpu'
            --num-shards=$$BUILDKITE_PARALLEL_JOB_COUNT --shard-id=$$BUILDKITE_PARALLEL_JOB
      - label: "Blocking failure"
        agent_pool: mi300_1
        mirror_hardwares: [amdproduction]
        grade: Blocking
        commands:
          - "pytest -q tests/e2e -m 'advanced_model and cpu' --run-level advanced_model"
      - label: "After the failure"
        agent_pool: mi300_1
        mirror_hardwares: [amdproduction]
        grade: Blocking
        commands:
          - "pytest -q tests/diffusion -m 'core_model and cpu'"
      - label: "Needs GPUs"
        agent_pool: mi300_4
        mirror_hardwares: [amdproduction]
        grade: Blocking
        commands:
          - "pytest -q tests/engine -m 'core_model and rocm and cards_4'"
"""


def fixture_repo(dest: Path) -> Path:
    """A copy of the sample's tests and package with TIER as its AMD ready tier."""
    dest.mkdir(parents=True, exist_ok=True)
    copy_tracked(SAMPLE, dest, "tests", "omni_sample", "pyproject.toml", "setup.py")
    amd = dest / ".buildkite" / "amd"
    amd.mkdir(parents=True)
    (amd / "test-amd-ready.yml").write_text(TIER)
    return dest
