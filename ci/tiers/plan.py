"""Steps → jobs: one per parallelism shard, each a ready-to-run command (pure).

Every job runs the rendered program (`ci.runner.program`): rocm with the MI300
semantics on the AMD template's TEST_COMMANDS, cuda/npu/xpu under `bash -e`; in
the platform's CI image with the repo mounted, or here with `--native`.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ci.amd.render import gpu_count, render_step
from ci.door import Command
from ci.pipeline.stepsource import unescape, upload_interpolate
from ci.platforms import Platform
from ci.runner.native import NPU, ROCM
from ci.runner.program import REQUIRE_COMMANDS, Semantics, render_program, section
from ci.runner.teelog import BOOTSTRAP, package_parent
from ci.tiers.model import AMD_DEFAULT_POOL, TierStep
from ci.tiers.terminal import strip_emoji

# Every tier container carries this label (and TIER_LABEL=<tier>), so leftovers can be found.
CONTAINER_LABEL = "vllm-omni-ci.tier"
JOB_SHELL = {
    Platform.CUDA: Semantics(platform="cuda", preflight=(REQUIRE_COMMANDS, section("CUDA tests"))),
    Platform.XPU: Semantics(
        platform="xpu", preflight=(REQUIRE_COMMANDS, section("Intel XPU tests"))
    ),
}
# Where each platform's job runs: the AMD runner's `cd`, the Buildkite k8s
# checkout for cuda/npu, the XPU script's checkout in its image.
WORKDIRS = {
    Platform.ROCM: "/app/vllm-omni",
    Platform.CUDA: "/workspace",
    Platform.NPU: "/workspace",
    Platform.XPU: "/workspace/vllm-omni",
}
# Wraps every job: its output goes through the tee (`ci.runner.teelog`) to the log
# file, redacted, and to our stderr too when streaming. The job never writes the
# results disk itself, and the wrapper exits with the job's own status.
_WRAP = (
    "log=$1; mode=$2; status=$3; python=$4; parent=$5; shift 5; "
    f'"$@" 2>&1 | "$python" -I -c {shlex.quote(BOOTSTRAP)} "$parent" "$log" "$mode" "$status"; '
    'exit "${PIPESTATUS[0]}"'
)
# `bash -c _WRAP tier-job LOG MODE STATUS PYTHON PARENT`, then the job's own argv.
WRAPPER_WORDS = 9


@dataclass(frozen=True)
class Host:
    """What this machine offers a tier run (probed by the session, not here)."""

    repo: Path
    commit: str
    results: Path
    images: Mapping[Platform, str] = field(default_factory=dict)  # per platform (npu: a2)
    npu_images: Mapping[str, str] = field(default_factory=dict)  # preset -> image
    devices: Mapping[Platform, tuple[str, ...]] = field(default_factory=dict)  # docker args
    environ: Mapping[str, str] = field(default_factory=dict)
    docker: str = "docker"
    run_id: str = "local"
    scratch: Path | None = None  # the tees' STATUS files, off the results disk (maybe full)
    python: str = sys.executable  # runs the log writer (`ci.runner.teelog`)


@dataclass(frozen=True)
class Options:
    native: bool = False
    force: bool = False
    step: str = ""
    image: str = ""
    labels: tuple[str, ...] = ()
    stream: bool = True  # tee job output to stderr (CI) or only to the log (live table)


@dataclass(frozen=True)
class Job:
    """One step shard: run it, or say why not."""

    step: TierStep
    position: int  # 1-based place of the step in its tier
    name: str  # the label as Buildkite shows it (%n/%N/%t filled in)
    shard: int | None = None  # 0-based, for parallel steps
    reason: str = ""  # why it does not run ("" = it runs)
    env: Mapping[str, str] = field(default_factory=dict)
    program: str = ""
    image: str = ""
    container: str = ""
    log: Path | None = None
    command: Command | None = None
    status: Path | None = None  # the log writer's verdict on `log` (see `ci.runner.teelog`)

    @property
    def runs(self) -> bool:
        return self.command is not None

    @property
    def inner(self) -> tuple[str, ...]:
        """The job's own argv (docker run ..., or bash -c PROGRAM), without the log wrapper."""
        return () if self.command is None else self.command.argv[WRAPPER_WORDS:]

    @property
    def shard_text(self) -> str:
        return "" if self.shard is None else f"{self.shard + 1}/{self.step.parallelism}"

    @property
    def blocking(self) -> bool:
        return self.step.blocking

    @property
    def title(self) -> str:
        """The name, plus `[shard i/n]` when the label has no %n/%N placeholder."""
        if self.shard is None or self.name != self.step.label:
            return self.name
        return f"{self.name} [shard {self.shard_text}]"


def shard_label(label: str, shard: int | None, count: int) -> str:
    """Buildkite's parallel label placeholders: %n (0-based), %N (1-based), %t (total)."""
    if shard is None:
        return label
    return label.replace("%n", str(shard)).replace("%N", str(shard + 1)).replace("%t", str(count))


def _slug(text: str) -> str:
    text = re.sub(r"%[nNt]", "", strip_emoji(text))
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60] or "step"


def _interpolate(env: Mapping[str, str], context: Mapping[str, str]) -> dict[str, str]:
    """Upload-time interpolation of env values (`${BUILDKITE_COMMIT}` -> the commit)."""
    return {
        k: upload_interpolate(v, lambda name, _t: context.get(name, "")) for k, v in env.items()
    }


def rocm_job(
    step: TierStep, workdir: str, context: Mapping[str, str], gpus: int
) -> tuple[dict[str, str], str]:
    """(env, program) of an AMD step: the template's job env and TEST_COMMANDS, run natively."""
    raw = dict(step.raw)
    raw.setdefault("agent_pool", AMD_DEFAULT_POOL)
    if not step.raw.get("working_dir"):
        raw["working_dir"] = workdir
    rendered = render_step(raw, dict(step.file_env))
    env = {str(k): str(v) for k, v in rendered["env"].items()}
    commands = unescape(env.pop("TEST_COMMANDS"))
    env = _interpolate(env, context)
    # No persistent volume is mounted locally; the no-GPU pre-flight when count is 0.
    env["VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE"] = "0"
    env["VLLM_CI_EXPECTED_GPU_COUNT"] = str(gpus)
    return env, render_program(ROCM, commands)


def shell_job(step: TierStep, context: Mapping[str, str], gpus: int) -> tuple[dict[str, str], str]:
    """(env, program) of a cuda/npu/xpu step: its env, and its commands under `bash -e`."""
    semantics = NPU if step.platform is Platform.NPU else JOB_SHELL[step.platform]
    env = _interpolate(step.env, context)
    env["VLLM_CI_EXPECTED_GPU_COUNT"] = str(gpus)
    return env, render_program(semantics, step.job_commands)


def image_for(step: TierStep, host: Host, options: Options) -> str:
    if options.image:
        return options.image
    if step.platform is Platform.NPU and step.hardware in host.npu_images:
        return host.npu_images[step.hardware]
    return host.images.get(step.platform, "")


def _docker_argv(
    step: TierStep, host: Host, options: Options, env: Mapping[str, str], program: str, *where: str
) -> tuple[str, ...]:
    """`docker run` of the program; `where`: the image, the container's name, the workdir."""
    image, container, workdir = where
    labels = [f"{CONTAINER_LABEL}={step.tier}", f"{CONTAINER_LABEL}.run={host.run_id}"]
    argv = [host.docker, "run", "--rm", "--name", container]
    for label in (*labels, *options.labels):
        argv += ["--label", label]
    argv += ["--entrypoint", "bash", "-v", f"{host.repo}:{workdir}", "-w", workdir]
    argv += host.devices.get(step.platform, ())
    for name in env:  # values travel in the client's environment, never in argv
        argv += ["-e", name]
    return (*argv, image, "-c", program)


def plan_step(step: TierStep, position: int, host: Host, options: Options) -> list[Job]:
    """The jobs of one step: one per shard; not-run jobs carry their reason."""
    shards: Sequence[int | None] = list(range(step.parallelism)) if step.parallelism > 1 else [None]
    reason = step.skip_reason
    if not reason and not step.runs_on_cpu and not options.force:
        reason = step.need
    workdir = str(host.repo) if options.native else WORKDIRS[step.platform]
    context = {
        **host.environ,
        "BUILDKITE_COMMIT": host.commit,
        "BUILDKITE_BUILD_CHECKOUT_PATH": workdir,
    }
    # CPU-runnable steps, and forced steps on a machine without the devices,
    # get the no-GPU pre-flight; forced steps with devices present check them.
    rocm = step.platform is Platform.ROCM
    forced = options.force and not step.runs_on_cpu and bool(host.devices.get(step.platform))
    gpus = (gpu_count(step.hardware, step.label) if rocm else 1) if forced else 0
    jobs: list[Job] = []
    for shard in shards:
        name = shard_label(step.label, shard, step.parallelism)
        if reason:
            jobs.append(Job(step, position, name, shard, reason=reason))
            continue
        env, program = (
            rocm_job(step, workdir, context, gpus) if rocm else shell_job(step, context, gpus)
        )
        if options.native and "HF_HOME" in env and rocm:
            env["HF_HOME"] = host.environ.get("HF_HOME") or str(
                Path(host.environ.get("HOME", "/tmp")) / ".cache" / "huggingface"
            )
        env |= {"BUILDKITE_BUILD_CHECKOUT_PATH": workdir, "BUILDKITE_COMMIT": host.commit}
        env["BUILDKITE_LABEL"] = name
        if step.key:
            env["BUILDKITE_STEP_KEY"] = step.key
        if shard is not None:
            env["BUILDKITE_PARALLEL_JOB"] = str(shard)
            env["BUILDKITE_PARALLEL_JOB_COUNT"] = str(step.parallelism)
        suffix = "" if shard is None else f"-shard{shard + 1}"
        log = host.results / step.platform.value / f"{position:02d}-{_slug(step.label)}{suffix}.log"
        image = container = ""
        inner: tuple[str, ...] = ("bash", "-c", program)
        if not options.native:
            image = image_for(step, host, options)
            container = f"vllm-omni-ci-tier-{step.tier}-{step.platform}-{host.run_id}-{position}"
            container += suffix
            inner = _docker_argv(step, host, options, env, program, image, container, workdir)
        status = (
            host.scratch and host.scratch / f"{step.platform.value}-{position:02d}{suffix}.status"
        )
        mode = "tee" if options.stream else "log"
        wrapped = ("bash", "-c", _WRAP, "tier-job", str(log), mode, str(status or ""))
        command = Command(
            (*wrapped, host.python, package_parent(), *inner),
            description=name,
            env=env,
            cwd=str(host.repo) if options.native else None,
            timeout=None if step.timeout_minutes is None else step.timeout_minutes * 60.0,
        )
        ran = (env, program, image, container, log, command, status)
        jobs.append(Job(step, position, name, shard, "", *ran))
    return jobs


def select(steps: Sequence[TierStep], text: str) -> list[tuple[int, TierStep]]:
    """(position, step) of the steps whose label contains `text` (all when empty)."""
    return [(i, s) for i, s in enumerate(steps, 1) if not text or text in s.label]


def plan_tier(steps: Sequence[TierStep], host: Host, options: Options) -> list[Job]:
    chosen = select(steps, options.step)
    return [job for position, step in chosen for job in plan_step(step, position, host, options)]
