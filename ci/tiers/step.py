"""The two types every tier is made of, `Tier` and `TierStep`, shared by the step
sources (`ci.tiers.model` for the YAMLs, `ci.tiers.xpu`) without a cycle."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ci.pipeline.stepsource import Dependency, unescape
from ci.platforms import Platform
from ci.tiers.rules import Retry, SoftFail
from ci.topology import Tier as Tier


@dataclass(frozen=True)
class TierStep:
    """One step of a tier, with everything a local run carries over from CI."""

    platform: Platform
    tier: Tier
    label: str
    commands: tuple[str, ...]  # as written in the YAML (Buildkite `$$` escapes intact)
    prologue: tuple[str, ...] = ()  # prepended by the upload (CUDA presets' HF_TOKEN export)
    env: Mapping[str, str] = field(default_factory=dict)  # file env, then group and step env
    file_env: Mapping[str, str] = field(default_factory=dict)
    group: str = ""
    key: str = ""
    parallelism: int = 1
    timeout_minutes: int | None = None
    soft_fail: SoftFail = field(default_factory=SoftFail)
    retries: tuple[Retry, ...] = ()  # the step's own retry.automatic exit-status rules
    grade: str = ""  # AMD grade as written ("" elsewhere)
    hardware: str = ""  # what CI runs it on: agent_pool (rocm), preset (cuda/npu), queue
    runs_on_cpu: bool = False  # the CPU-runnable rule
    dropped: str = ""  # why the upload would not emit this step ("" = emitted)
    source: str = ""
    yaml_escaped: bool = True  # commands still hold Buildkite's `$$` escapes
    conditions: tuple[str, ...] = ()  # the `if`s of its groups, then its own
    if_false: str = ""  # the first of them that is false in the local context
    depends_on: tuple[Dependency, ...] = ()
    group_keys: tuple[str, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def shell_commands(self) -> tuple[str, ...]:
        """The commands as the job shell receives them after upload (`$$` -> `$`)."""
        return tuple(map(unescape, self.commands)) if self.yaml_escaped else self.commands

    @property
    def job_commands(self) -> tuple[str, ...]:
        """What the job shell runs: the upload's prologue, then the step's commands."""
        return (*(unescape(c) for c in self.prologue), *self.shell_commands)

    @property
    def blocking(self) -> bool:
        return self.soft_fail.blocking

    @property
    def grade_text(self) -> str:
        if self.grade or self.platform is Platform.ROCM:
            return f"{self.grade or 'no grade'} ({'blocking' if self.blocking else 'soft_fail'})"
        return self.soft_fail.describe()

    @property
    def skip_reason(self) -> str:
        """Why Buildkite would not create this job for the local context ("" = it would)."""
        if self.dropped:
            return f"dropped: {self.dropped}"
        if self.if_false:
            return f"if false here: {self.if_false}"
        return ""

    @property
    def need(self) -> str:
        """`needs <hardware>`, as reported for steps that do not run here."""
        return f"needs {self.hardware or self.platform.value}"
