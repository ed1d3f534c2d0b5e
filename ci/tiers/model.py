"""Tier x platform → the tier's steps, read only from the target repo's own sources.

- rocm: `.buildkite/amd/test-amd-<tier>.yml` (grade, agent_pool, parallelism);
- cuda: `.buildkite/cuda/test-<tier>.yml` (hardware = the upload-pipeline preset);
- npu: `.buildkite/npu/test-npu-<tier>.yml` (same);
- xpu: the XPU runner's command table (`ci.runner.xpu.COMMANDS`), ready only.

A pair without a source is `no <tier> tier for <platform>` (exit 2). On top of
`ci.pipeline.stepsource`: shards, timeout, soft-fail, hardware, the CPU rule, and
the `if`s evaluated as for a PR carrying the tier's label.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ci import topology
from ci.errors import UserError
from ci.pipeline import files
from ci.pipeline.ifexpr import Context, check
from ci.pipeline.mirror import HF_EXPORT, expand, parse_mirror_hw, plain_copy
from ci.pipeline.registries import Registries
from ci.pipeline.stepsource import env_of, load_documents, steps_of
from ci.platforms import Platform
from ci.target import resolve_branch
from ci.tiers.rules import amd_soft_fail, cpu_runnable, retries_of, soft_fail_of
from ci.tiers.step import Tier as Tier
from ci.tiers.step import TierStep as TierStep
from ci.tiers.xpu import XPU_SOURCE, xpu_steps

TIER_FILES = topology.TIER_PATTERNS
XPU_TIERS = (Tier.READY,)
# The PR label that uploads each tier: a local run is that PR's build.
TIER_LABELS = topology.LABELS
# The AMD template's default pool and mirror.
AMD_DEFAULT_POOL = "mi300_1"
AMD_MIRROR = "amdproduction"


def parse_tier(value: str | Tier) -> Tier:
    if isinstance(value, Tier):
        return value
    try:
        return Tier(value.strip().lower())
    except ValueError:
        allowed = ", ".join(t.value for t in Tier)
        raise UserError(f"unknown tier {value!r}: allowed values are {allowed}") from None


def missing(tier: Tier, platform: Platform) -> UserError:
    return UserError(f"no {tier} tier for {platform}")


def tier_file(repo: Path, tier: Tier, platform: Platform) -> Path | None:
    """The tier YAML of a platform in `repo`, or None when the pair has none."""
    pattern = TIER_FILES.get(platform)
    if pattern is None:
        return None
    path = repo / pattern.format(tier=tier.value)
    # A looping or dangling link is there (and unreadable when read), not "no tier".
    return path if files.exists(path) and not path.is_dir() else None


def has_tier(repo: Path, tier: Tier, platform: Platform) -> bool:
    if platform is Platform.XPU:
        return tier in XPU_TIERS
    return tier_file(repo, tier, platform) is not None


def source_of(repo: Path, tier: Tier, platform: Platform) -> str:
    return XPU_SOURCE if platform is Platform.XPU else TIER_FILES[platform].format(tier=tier.value)


def local_context(repo: Path, tier: Tier, environ: Mapping[str, str]) -> Context:
    """The `if`s' context: a PR build carrying the tier's label, `build.env(...)` the local
    environment (`NIGHTLY=1` opens what it gates), the branch BUILDKITE_BRANCH, else git's."""
    try:
        branch = resolve_branch(repo, env=environ)
    except UserError:
        branch = ""
    return Context.of(branch, [TIER_LABELS[tier]], environ)


def first_false(conditions: tuple[str, ...], context: Context) -> str:
    """The first `if` that is false in `context` ("" when none is; unknown counts as true)."""
    return next((text for text in conditions if check(text, context) is False), "")


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


class _Hardware:
    """The preset the upload-pipeline code resolves for a CUDA/NPU step (registries read once)."""

    def __init__(self, repo: Path, environ: Mapping[str, str]) -> None:
        self.registries = Registries.for_repo(repo)
        self._selector: str | None = None
        self._selector_error = ""
        try:
            self._selector = parse_mirror_hw(environ.get("MIRROR_HW"))
        except UserError as exc:
            self._selector_error = "; ".join(exc.problems)

    def resolve(self, raw: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...]]:
        """(hardware, dropped reason, prologue) of one step, as the uploader expands it.

        The prologue is what the preset prepends to the commands (the CUDA
        presets' `HF_TOKEN` export from `VLLM_CI_HF_TOKEN`).
        """
        if self._selector_error:
            return f"unresolved ({self._selector_error})", "", ()
        try:
            expansion = expand(plain_copy(dict(raw)), self._selector, self.registries)
        except UserError as exc:
            return f"unresolved preset ({'; '.join(exc.problems)})", "", ()
        if expansion.step is None:
            return "", "; ".join(expansion.log) or "dropped by the uploader", ()
        commands = expansion.step.get("commands")
        prologue = (
            (HF_EXPORT,) if isinstance(commands, list) and commands[:1] == [HF_EXPORT] else ()
        )
        if expansion.preset:
            return expansion.preset, "", prologue
        agents = raw.get("agents")
        if isinstance(agents, Mapping) and agents.get("queue"):
            return f"queue {agents['queue']}", "", prologue
        return "", "", prologue


def _yaml_steps(
    repo: Path, tier: Tier, platform: Platform, path: Path, environ: Mapping[str, str]
) -> list[TierStep]:
    rel = path.relative_to(repo).as_posix()
    hardware = None if platform is Platform.ROCM else _Hardware(repo, environ)
    context = local_context(repo, tier, environ)
    found: list[TierStep] = []
    documents = load_documents(path, rel)
    if not any(isinstance(d, Mapping) and isinstance(d.get("steps"), list) for d in documents):
        # An empty or scalar tier file would otherwise "pass" with nothing run.
        raise UserError(f"{rel}: not a test pipeline (a mapping with a `steps` list)", code=1)
    for document in documents:
        file_env = env_of(document.get("env")) if isinstance(document, Mapping) else {}
        for step in steps_of(document, rel):
            raw = step.raw
            dropped = ""
            prologue: tuple[str, ...] = ()
            if platform is Platform.ROCM:
                need = str(raw.get("agent_pool") or AMD_DEFAULT_POOL)
                soft, grade = amd_soft_fail(raw.get("grade")), str(raw.get("grade") or "")
                mirrors = raw.get("mirror_hardwares") or []
                if AMD_MIRROR not in (mirrors if isinstance(mirrors, list) else [mirrors]):
                    dropped = f"not mirrored to {AMD_MIRROR}"
            else:
                assert hardware is not None
                need, dropped, prologue = hardware.resolve(raw)
                soft, grade = soft_fail_of(raw.get("soft_fail")), ""
            found.append(
                TierStep(
                    platform=platform,
                    tier=tier,
                    label=step.label,
                    commands=step.commands,
                    prologue=prologue,
                    env=dict(step.env),
                    file_env=file_env,
                    group=step.group,
                    key=step.key,
                    parallelism=max(_int(raw.get("parallelism")) or 1, 1),
                    timeout_minutes=_int(raw.get("timeout_in_minutes")),
                    soft_fail=soft,
                    retries=retries_of(raw.get("retry")),
                    grade=grade,
                    hardware=need,
                    runs_on_cpu=cpu_runnable(step.shell_commands),
                    dropped=dropped,
                    source=rel,
                    conditions=step.conditions,
                    if_false=first_false(step.conditions, context),
                    depends_on=step.depends_on,
                    group_keys=step.group_keys,
                    raw=raw,
                )
            )
    return found


def tier_keys(steps: Sequence[TierStep]) -> set[str]:
    """The step and group keys the tier defines (other `depends_on` keys are its build steps)."""
    return {s.key for s in steps if s.key} | {k for s in steps for k in s.group_keys}


def load_tier(
    repo: Path, tier: Tier, platform: Platform, environ: Mapping[str, str] | None = None
) -> list[TierStep]:
    """Every step of the tier, in file order; `no <tier> tier for <platform>` when none.

    `environ` (default: this process's) is what the upload would see: `MIRROR_HW`
    for the presets, the build env of the `if`s.
    """
    if platform is Platform.XPU:
        if tier not in XPU_TIERS:
            raise missing(tier, platform)
        return xpu_steps(tier)
    path = tier_file(repo, tier, platform)
    if path is None:
        raise missing(tier, platform)
    return _yaml_steps(repo, tier, platform, path, os.environ if environ is None else environ)
