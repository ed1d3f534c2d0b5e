"""The platform-by-tier table: what each tier of each platform is called, where, and when it runs.

Every task that needs one of these facts reads it here (skip-ci, the
bootstraps, the AMD suite selector, the local tiers, `plan`). Columns:

* `file`: the tier's test YAML; `label`: the PR label that uploads it off main;
* `level`: the skip-ci level that gates it (`l2` ready, `l3` merge; `l45`:
  nightly and weekly, never gated, but a change to them is a CI-YAML change);
* `upload_key`: the CUDA/NPU bootstrap step that uploads it;
* `auto`: what `--scope auto` picks on main under one of its env flags set to
  "1": the whole file (`all`) or its E2E groups (`e2e`); else the diff decides.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from ci.platforms import Platform


class Tier(str, enum.Enum):
    READY = "ready"
    MERGE = "merge"
    NIGHTLY = "nightly"
    WEEKLY = "weekly"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class AutoRule:
    """On `main` with one of `env` set to "1", upload `scope`; otherwise the diff."""

    scope: Literal["all", "e2e"]
    env: tuple[str, ...]


@dataclass(frozen=True)
class TierRow:
    platform: Platform
    tier: Tier
    file: str
    level: Literal["l2", "l3", "l45"]
    upload_key: str | None = None
    auto: AutoRule | None = None

    @property
    def label(self) -> str:
        """The PR label that uploads this tier off main."""
        return LABELS[self.tier]


R, C, N, X = Platform.ROCM, Platform.CUDA, Platform.NPU, Platform.XPU
READY, MERGE, NIGHTLY, WEEKLY = Tier.READY, Tier.MERGE, Tier.NIGHTLY, Tier.WEEKLY
LABELS: Final[Mapping[Tier, str]] = {
    READY: "ready",
    MERGE: "merge-test",
    NIGHTLY: "nightly-test",
    WEEKLY: "weekly-test",
}
# The schedule variables a build's env sets ("1": on), which the tiers' rules read: the
# bootstraps' gates, `--scope auto`, `plan`, the AMD nightly selection and cov-split.
NIGHTLY_ENV: Final = "NIGHTLY"
WEEKLY_ENV: Final = "WEEKLY"
NON_CRITICAL_ENV: Final = "NON_CRITICAL"
SCHEDULE_ENV: Final = (NIGHTLY_ENV, WEEKLY_ENV, NON_CRITICAL_ENV)
_E2E_WEEKLY = AutoRule("e2e", (WEEKLY_ENV,))
_ALL_NIGHTLY = AutoRule("all", (NIGHTLY_ENV,))

TABLE: Final[tuple[TierRow, ...]] = (
    TierRow(R, READY, ".buildkite/amd/test-amd-ready.yml", "l2"),
    TierRow(R, MERGE, ".buildkite/amd/test-amd-merge.yml", "l3"),
    TierRow(R, NIGHTLY, ".buildkite/amd/test-amd-nightly.yml", "l45"),
    TierRow(C, READY, ".buildkite/cuda/test-ready.yml", "l2", "upload-ready-pipeline", _E2E_WEEKLY),
    TierRow(C, MERGE, ".buildkite/cuda/test-merge.yml", "l3", "upload-merge-pipeline", _E2E_WEEKLY),
    TierRow(
        C, NIGHTLY, ".buildkite/cuda/test-nightly.yml", "l45",
        "upload-nightly-pipeline", _ALL_NIGHTLY,
    ),
    TierRow(
        C, WEEKLY, ".buildkite/cuda/test-weekly.yml", "l45",
        "upload-weekly-pipeline", AutoRule("all", (WEEKLY_ENV, NON_CRITICAL_ENV)),
    ),
    TierRow(N, READY, ".buildkite/npu/test-npu-ready.yml", "l2", "upload-ready-pipeline"),
    TierRow(
        N, NIGHTLY, ".buildkite/npu/test-npu-nightly.yml", "l45",
        "upload-nightly-pipeline", _ALL_NIGHTLY,
    ),
    # Intel has one pipeline, gated as l2 on every branch, uploaded by its bootstrap.
    TierRow(X, READY, ".buildkite/intel/pipeline-intel.yml", "l2"),
)  # fmt: skip

# skip-ci's own platform names, in the order its messages and matrix use.
SKIP_CI_NAMES: Final[Mapping[Platform, str]] = {C: "cuda", R: "amd", X: "intel", N: "npu"}
# Where each platform's tier files live, for tiers a repo adds beyond the table.
TIER_PATTERNS: Final[Mapping[Platform, str]] = {
    R: ".buildkite/amd/test-amd-{tier}.yml",
    C: ".buildkite/cuda/test-{tier}.yml",
    N: ".buildkite/npu/test-npu-{tier}.yml",
}


def rows(platform: Platform | None = None) -> tuple[TierRow, ...]:
    return tuple(r for r in TABLE if platform is None or r.platform is platform)


def row(platform: Platform, tier: Tier) -> TierRow | None:
    return next((r for r in TABLE if r.platform is platform and r.tier is tier), None)


def upload_keys() -> tuple[str, ...]:
    """The bootstrap upload step keys, in tier order."""
    keys = (r.upload_key for t in Tier for r in TABLE if r.tier is t and r.upload_key)
    return tuple(dict.fromkeys(keys))


def auto_rules() -> dict[str, AutoRule]:
    """Test YAML -> its `--scope auto` rule (files without one are always diff-aware)."""
    return {r.file: r.auto for r in TABLE if r.auto is not None}
