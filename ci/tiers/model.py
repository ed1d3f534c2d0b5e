"""Tier x platform → the tier's steps, read only from the target repo's own sources.

- rocm, cuda, npu: the tier YAML of `ci.topology.TIER_PATTERNS` (rocm: grade,
  agent_pool; cuda/npu: the hardware is the upload-pipeline preset);
- xpu: the XPU runner's test list (the checkout's `.buildkite/intel/xpu-tests.txt`, else
  the built-in `ci.runner.xpu.COMMANDS` with a `note:`), ready only.

A pair without a source is `Unavailable`, `no <tier> tier for <platform>` (exit 2; under nox
a skip). Each step is the YAML's `ShellStep` plus what a local run carries over from CI:
shards, timeout, soft-fail, retries, hardware, the CPU rule, and the `if`s evaluated as
for a PR carrying the tier's label.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ci import topology
from ci.amd.render import DEFAULT_POOL
from ci.errors import Failure, TaskError, Unavailable
from ci.pipeline import files, refusals
from ci.pipeline.ifexpr import Context, check
from ci.pipeline.mirror import HF_EXPORT, expand, parse_mirror_hw, plain_copy
from ci.pipeline.numbers import parallelism_of
from ci.pipeline.registries import Registries
from ci.pipeline.stepshape import document_problems
from ci.pipeline.stepsource import ShellStep, env_of, load_documents, steps_of, unescape
from ci.platforms import Platform
from ci.runner import xpu, xputests
from ci.target import resolve_branch
from ci.tiers.rules import Retry, SoftFail, as_int, cpu_runnable, retries_of, soft_fail_of
from ci.topology import Tier as Tier

AMD_MIRROR = "amdproduction"  # an AMD step is uploaded only when it names this mirror
XPU_SOURCE = "ci/runner/xpu.py (the built-in XPU test list)"  # the checkout has no list
SIZED = re.compile(r"([A-Za-z0-9]+)(?:_[A-Za-z]+)*_(\d+)")  # mi300_4, h100_1, a2b3_npu_1


@dataclass(frozen=True, kw_only=True)
class TierStep(ShellStep):
    """One step of a tier (`file`: its source), with what a local run carries over from CI."""

    platform: Platform
    tier: Tier
    prologue: tuple[str, ...] = ()  # prepended by the upload (CUDA presets' HF_TOKEN export)
    file_env: Mapping[str, str] = field(default_factory=dict)
    parallelism: int = 1
    timeout_minutes: int | None = None
    soft_fail: SoftFail = field(default_factory=SoftFail)
    retries: tuple[Retry, ...] = ()  # the step's own retry.automatic exit-status rules
    grade: str = ""  # AMD grade as written ("" elsewhere)
    hardware: str = ""  # what CI runs it on: agent_pool (rocm), preset (cuda/npu), queue
    runs_on_cpu: bool = False  # the CPU-runnable rule
    dropped: str = ""  # why the upload would not emit this step ("" = emitted)
    yaml_escaped: bool = True  # commands still hold Buildkite's `$$` escapes
    if_false: str = ""  # the first of `conditions` that is false in the local context

    @property
    def shell_commands(self) -> tuple[str, ...]:
        return super().shell_commands if self.yaml_escaped else self.commands

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
        return f"if false here: {self.if_false}" if self.if_false else ""

    @property
    def need(self) -> str:
        return f"needs {self.hardware or self.platform.value}"

    @property
    def cards(self) -> int:
        """The devices it asks for: its pool's or preset's `_<n>` (`mi300_4`, `a2b3_npu_1`);
        xpu's queue 1; 0 when nothing says (a bare queue, an unresolved preset)."""
        if match := SIZED.fullmatch(self.hardware):
            return int(match[2])
        return 1 if self.platform is Platform.XPU else 0

    @property
    def sku(self) -> str:
        """The chip its pool or preset names, upper-cased (`MI300`, `H100`); "" for none."""
        match = SIZED.fullmatch(self.hardware)
        return match[1].upper() if match else ""


def source_of(repo: Path, tier: Tier, platform: Platform) -> str | None:
    """The tier's source (a YAML relative to `repo`; xpu: the test list), or None: no such
    tier."""
    if platform is Platform.XPU:  # the XPU tiers are the runner's test list
        if not topology.row(platform, tier):
            return None
        return xputests.TESTS_FILE if files.exists(repo / xputests.TESTS_FILE) else XPU_SOURCE
    rel = topology.TIER_PATTERNS[platform].format(tier=tier.value)
    # A looping or dangling link is there (and unreadable when read), not "no tier".
    return rel if files.exists(repo / rel) and not (repo / rel).is_dir() else None


def local_context(repo: Path, tier: Tier, environ: Mapping[str, str]) -> Context:
    """The `if`s' context: a PR build carrying the tier's label, `build.env(...)` the local
    environment (`NIGHTLY=1` opens what it gates), the branch BUILDKITE_BRANCH, else git's."""
    try:
        branch = resolve_branch(repo, env=environ)
    except TaskError:
        branch = ""
    return Context.of(branch, [topology.LABELS[tier]], environ)


def first_false(conditions: tuple[str, ...], context: Context) -> str:
    """The first `if` that is false in `context` ("" when none is; unknown counts as true)."""
    return next((text for text in conditions if check(text, context) is False), "")


Hardware = Callable[[Mapping[str, Any]], tuple[str, str, tuple[str, ...]]]


def _presets(repo: Path, environ: Mapping[str, str]) -> Hardware:
    """(hardware, dropped reason, prologue) of a CUDA/NPU step, as the uploader expands it.

    The prologue is what the preset prepends to the commands (the CUDA presets'
    `HF_TOKEN` export from `VLLM_CI_HF_TOKEN`).
    """
    registries = Registries.for_repo(repo)
    try:
        selector = parse_mirror_hw(environ.get("MIRROR_HW"))
    except TaskError as exc:
        unresolved = f"unresolved ({'; '.join(exc.problems)})"
        return lambda _raw: (unresolved, "", ())

    def resolve(raw: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...]]:
        try:
            expansion = expand(plain_copy(dict(raw)), selector, registries)
        except TaskError as exc:
            return f"unresolved preset ({'; '.join(exc.problems)})", "", ()
        if expansion.step is None:
            return "", "; ".join(expansion.log) or "dropped by the uploader", ()
        commands = expansion.step.get("commands")
        prologue = (
            (HF_EXPORT,) if isinstance(commands, list) and commands[:1] == [HF_EXPORT] else ()
        )
        agents = raw.get("agents")
        if not expansion.preset and isinstance(agents, Mapping) and agents.get("queue"):
            return f"queue {agents['queue']}", "", prologue
        return expansion.preset or "", "", prologue

    return resolve


def _yaml_steps(
    repo: Path, tier: Tier, platform: Platform, rel: str, environ: Mapping[str, str]
) -> list[TierStep]:
    hardware = None if platform is Platform.ROCM else _presets(repo, environ)
    context = local_context(repo, tier, environ)
    found: list[TierStep] = []
    documents = load_documents(repo / rel, rel)
    if not any(isinstance(d, Mapping) and isinstance(d.get("steps"), list) for d in documents):
        # An empty or scalar tier file would otherwise "pass" with nothing run.
        raise Failure(f"{rel}: not a test pipeline (a mapping with a `steps` list)")
    # The uploader's own refusals (a `command` that is no shell text, `parallelism: 0` or
    # 10**9), all at once and before a job is planned: a tier plans one job per shard.
    # And Buildkite's: an `if` that does not parse, a key used twice, a depends_on cycle (its
    # steps would wait for each other for ever: "not run", and the tier passed).
    shapes = [p for d in documents for p in document_problems(d, rel)]
    Failure.collect(shapes + refusals.problems(documents, rel))
    for document in documents:
        file_env = env_of(document.get("env")) if isinstance(document, Mapping) else {}
        for step in steps_of(document, rel):
            raw = step.raw
            dropped = ""
            prologue: tuple[str, ...] = ()
            if hardware is None:
                need = str(raw.get("agent_pool") or DEFAULT_POOL)
                grade = str(raw.get("grade") or "")
                soft = SoftFail(every=grade != "Blocking")  # the AMD template's rule
                mirrors = raw.get("mirror_hardwares") or []
                if AMD_MIRROR not in (mirrors if isinstance(mirrors, list) else [mirrors]):
                    dropped = f"not mirrored to {AMD_MIRROR}"
            else:
                need, dropped, prologue = hardware(raw)
                soft, grade = soft_fail_of(raw.get("soft_fail")), ""
            found.append(
                TierStep(
                    **{f.name: getattr(step, f.name) for f in fields(ShellStep)},
                    platform=platform,
                    tier=tier,
                    prologue=prologue,
                    file_env=file_env,
                    parallelism=parallelism_of(raw, rel),
                    timeout_minutes=as_int(raw.get("timeout_in_minutes")),
                    soft_fail=soft,
                    retries=retries_of(raw.get("retry")),
                    grade=grade,
                    hardware=need,
                    runs_on_cpu=cpu_runnable(step.shell_commands),
                    dropped=dropped,
                    if_false=first_false(step.conditions, context),
                )
            )
    return found


def load_tier(
    repo: Path, tier: Tier, platform: Platform, environ: Mapping[str, str] | None = None
) -> list[TierStep]:
    """Every step of the tier, in file order; `Unavailable` when the repo has none.

    `environ` (default: this process's) is what the upload would see: `MIRROR_HW`
    for the presets, the build env of the `if`s.
    """
    rel = source_of(repo, tier, platform)
    if rel is None:
        # The platforms that have it, in this repo (the sources the table and its patterns
        # name), so the printed line and a nox skip both say where to look instead.
        have = [p.value for p in Platform if source_of(repo, tier, p)]
        said = f"{', '.join(have)} only" if have else "no platform has one"
        raise Unavailable(f"no {tier} tier for {platform} ({said})")
    if platform is not Platform.XPU:
        return _yaml_steps(repo, tier, platform, rel, os.environ if environ is None else environ)
    tests = xpu.load_tests(repo)
    return [  # xpu: the one job of `.buildkite/intel/pipeline-intel.yml`
        TierStep(
            file=rel,
            label="Intel: XPU Test",
            commands=tests.commands,
            group="INTEL Tests",
            platform=platform,
            tier=tier,
            timeout_minutes=60,
            hardware="intel-gpu-omni",  # the queue
            runs_on_cpu=cpu_runnable(tests.commands),
            yaml_escaped=False,
        )
    ]
