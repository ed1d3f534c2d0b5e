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

from ci.amd.render import WORKING_DIR, gpu_count, render_step
from ci.door import Command
from ci.images.refs import ci_image
from ci.pipeline.stepsource import unescape, upload_interpolate
from ci.platforms import Platform
from ci.runner import xpu
from ci.runner.native import NPU, ROCM
from ci.runner.program import REQUIRE_COMMANDS, Semantics, render_program, section
from ci.runner.teelog import BOOTSTRAP, package_parent
from ci.tiers.model import TierStep
from ci.tiers.terminal import strip_emoji

# Every tier container carries `<this>=<tier>` and `<this>.run=<run id>`: leftovers can be found.
CONTAINER_LABEL = "vllm-omni-ci.tier"
# The job shell of the non-AMD platforms: `bash -e`, npu with the NPU runner's env.
JOB_SHELL = {
    Platform.NPU: NPU,
    **{
        platform: Semantics(platform.value, preflight=(REQUIRE_COMMANDS, section(title)))
        for platform, title in ((Platform.CUDA, "CUDA tests"), (Platform.XPU, "Intel XPU tests"))
    },
}
# Where each platform's job runs: the AMD runner's `cd`, the Buildkite k8s
# checkout for cuda/npu, the XPU script's checkout in its image.
WORKDIRS = {
    Platform.ROCM: WORKING_DIR,
    Platform.CUDA: "/workspace",
    Platform.NPU: "/workspace",
    Platform.XPU: xpu.WORKDIR,
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
    devices: Mapping[Platform, tuple[str, ...]] = field(default_factory=dict)  # docker args
    environ: Mapping[str, str] = field(default_factory=dict)
    docker: str = "docker"
    run_id: str = "local"
    scratch: Path | None = None  # the tees' STATUS files, off the results disk (maybe full)


@dataclass(frozen=True)
class Options:
    """The `tier` task's options, as given (`ci.tiers.session.parse_args` checks them)."""

    platform: str = ""
    repo: str = ""
    image: str = ""
    native: bool = False
    force: bool = False
    list: bool = False
    step: str = ""
    keep_going: bool = False
    results: str = ""
    label: Sequence[str] = ()  # extra container labels, KEY=VALUE
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


def job_program(
    step: TierStep, workdir: str, context: Mapping[str, str], gpus: int
) -> tuple[dict[str, str], str]:
    """(env, program) of a step: rocm the AMD template's job env and TEST_COMMANDS under the
    MI300 semantics, else its env and commands under `bash -e`; env values interpolated as
    the upload does (`${BUILDKITE_COMMIT}` -> the commit)."""
    if step.platform is Platform.ROCM:
        raw = dict(step.raw)
        if not raw.get("working_dir"):
            raw["working_dir"] = workdir
        env = {str(k): str(v) for k, v in render_step(raw, dict(step.file_env))["env"].items()}
        program = render_program(ROCM, unescape(env.pop("TEST_COMMANDS")))
        env["VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE"] = "0"  # no persistent volume is mounted here
    else:
        env, program = dict(step.env), render_program(JOB_SHELL[step.platform], step.job_commands)
    env = {k: upload_interpolate(v, lambda name, _t: context.get(name, "")) for k, v in env.items()}
    env["VLLM_CI_EXPECTED_GPU_COUNT"] = str(gpus)  # 0: the no-GPU pre-flight
    return env, program


def plan_step(step: TierStep, position: int, host: Host, options: Options) -> list[Job]:
    """The jobs of one step: one per shard; not-run jobs carry their reason."""
    shards: Sequence[int | None] = list(range(step.parallelism)) if step.parallelism > 1 else [None]
    reason = step.skip_reason or ("" if step.runs_on_cpu or options.force else step.need)
    if reason:
        return [
            Job(step, position, shard_label(step.label, s, step.parallelism), s, reason=reason)
            for s in shards
        ]
    return [_job(step, position, shard, host, options) for shard in shards]


def _job(step: TierStep, position: int, shard: int | None, host: Host, options: Options) -> Job:
    name = shard_label(step.label, shard, step.parallelism)
    workdir = str(host.repo) if options.native else WORKDIRS[step.platform]
    checkout = {"BUILDKITE_BUILD_CHECKOUT_PATH": workdir, "BUILDKITE_COMMIT": host.commit}
    # CPU-runnable steps, and forced steps on a machine without the devices,
    # get the no-GPU pre-flight; forced steps with devices present check them.
    forced = not step.runs_on_cpu and bool(host.devices.get(step.platform))
    rocm = step.platform is Platform.ROCM
    gpus = (gpu_count(step.hardware, step.label) if rocm else 1) if forced else 0
    env, program = job_program(step, workdir, {**host.environ, **checkout}, gpus)
    if options.native and "HF_HOME" in env and rocm:
        env["HF_HOME"] = host.environ.get("HF_HOME") or str(
            Path(host.environ.get("HOME", "/tmp")) / ".cache" / "huggingface"
        )
    env |= {**checkout, "BUILDKITE_LABEL": name}
    if step.key:
        env["BUILDKITE_STEP_KEY"] = step.key
    if shard is not None:
        env["BUILDKITE_PARALLEL_JOB"] = str(shard)
        env["BUILDKITE_PARALLEL_JOB_COUNT"] = str(step.parallelism)
    suffix = "" if shard is None else f"-shard{shard + 1}"
    log = host.results / step.platform.value / f"{position:02d}-{_slug(step.label)}{suffix}.log"
    status = host.scratch and host.scratch / f"{step.platform.value}-{position:02d}{suffix}.status"
    image = container = ""
    inner: tuple[str, ...] = ("bash", "-c", program)
    if not options.native:
        # The tag `build-image` gives the commit (npu: the variant of the step's preset).
        image = options.image or ci_image(step.platform, host.commit, host.environ, step.hardware)
        container = f"vllm-omni-ci-tier-{step.tier}-{step.platform}-{host.run_id}-{position}"
        container += suffix
        labels = (f"{CONTAINER_LABEL}={step.tier}", f"{CONTAINER_LABEL}.run={host.run_id}")
        inner = (
            *(host.docker, "run", "--rm", "--name", container),
            *(word for label in (*labels, *options.label) for word in ("--label", label)),
            *("--entrypoint", "bash", "-v", f"{host.repo}:{workdir}", "-w", workdir),
            *host.devices.get(step.platform, ()),
            # The values travel in the client's environment, never in argv.
            *(word for name in env for word in ("-e", name)),
            *(image, "-c", program),
        )
    mode = "tee" if options.stream else "log"
    wrapped = ("bash", "-c", _WRAP, "tier-job", str(log), mode, str(status or ""))
    command = Command(
        (*wrapped, sys.executable, package_parent(), *inner),
        description=name,
        env=env,
        cwd=str(host.repo) if options.native else None,
        timeout=None if step.timeout_minutes is None else step.timeout_minutes * 60.0,
    )
    return Job(
        step, position, name, shard, "", env, program, image, container, log, command, status
    )


def select(steps: Sequence[TierStep], text: str) -> list[tuple[int, TierStep]]:
    """(position, step) of the steps whose label contains `text` (all when empty)."""
    return [(i, s) for i, s in enumerate(steps, 1) if not text or text in s.label]


def plan_tier(steps: Sequence[TierStep], host: Host, options: Options) -> list[Job]:
    chosen = select(steps, options.step)
    return [job for position, step in chosen for job in plan_step(step, position, host, options)]
