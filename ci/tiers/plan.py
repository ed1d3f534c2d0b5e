"""Steps → jobs: one per parallelism shard, each a ready-to-run command (pure).

Every job runs the rendered program in its platform's job shell (`ci.runner.program.SHELLS`):
rocm the MI300 one on the AMD template's TEST_COMMANDS, cuda/npu/xpu `bash -e`; in the
platform's CI image with the repo mounted, or here with `--native`; its output goes to its
log through the door (`ci.tiers.execute.run_job`).
A container runs as the invoking user (its groups too, for the device nodes), with
HOME=/tmp, so what it writes into the checkout is the user's.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ci.amd.render import WORKING_DIR, render_step
from ci.devices import Device, Inventory, assigned, hidden
from ci.door import Command
from ci.images.refs import ci_image
from ci.pipeline.stepsource import unescape, upload_interpolate
from ci.platforms import Platform
from ci.runner import xpu
from ci.runner.program import SHELLS, render_program
from ci.tiers.model import TierStep
from ci.tiers.terminal import strip_emoji

# Every tier container carries `<this>=<tier>` and `<this>.run=<run id>`: leftovers can be found.
CONTAINER_LABEL = "vllm-omni-ci.tier"
# Where each platform's job runs: the AMD runner's `cd`, the Buildkite k8s
# checkout for cuda/npu, the XPU script's checkout in its image.
WORKDIRS = {
    Platform.ROCM: WORKING_DIR,
    Platform.CUDA: "/workspace",
    Platform.NPU: "/workspace",
    Platform.XPU: xpu.WORKDIR,
}
CONTAINER_HOME = "/tmp"  # writable whoever runs the container: pip's and pytest's caches
# Each pytest of a job writes its own JUnit file into the job's `.junit` folder: the job's
# PYTEST_ADDOPTS names `junit-${VLLM_OMNI_CI_PYTEST}.xml` (pytest expands variables in it),
# and this file, the job's BASH_ENV, has every bash of the job count its commands into that
# variable (`<shell pid>-<n>`), so no two pytest commands of a job write the same file.
JUNIT_COUNTER = (
    "trap '__omni_ci_n=$((${__omni_ci_n:-0} + 1)); "
    'export VLLM_OMNI_CI_PYTEST="$$-${__omni_ci_n}"\' DEBUG\n'
)


@dataclass(frozen=True)
class Options:
    """The `tier` task's options, as given (`ci.tiers.session.parse_args` checks them); then,
    for the plan, with `repo` and `results` resolved and what the session probed here."""

    platform: str = ""
    repo: str = ""
    image: str = ""
    native: bool = False
    force: bool = False
    list: bool = False
    step: str = ""
    keep_going: bool = False
    jobs: int = 0  # at most this many at a time (0: this host's CPU count)
    results: str = ""
    label: Sequence[str] = ()  # extra container labels, KEY=VALUE
    stream: bool = True  # tee job output to stderr (CI) or only to the log (live table)
    commit: str = ""
    environ: Mapping[str, str] = field(default_factory=dict)
    docker: str = "docker"
    run_id: str = "local"
    scratch: Path | None = None  # the jobs' JUnit folders, off the results disk (maybe full)
    inventory: Inventory = field(default_factory=Inventory)  # this host's devices
    exact_sku: bool = False  # GPU steps run only on devices whose name has their SKU
    cpu_only: bool = False  # GPU steps run only with --force, on no device


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
    # The folder of the JUnit files the job's pytest commands write (`JUNIT_COUNTER`), in
    # the scratch: off the results disk, whose filling must not fail a pytest.
    junit: Path | None = None
    where: str = ""  # what it runs on, when it holds devices: `h100_1 on NVIDIA H200`
    # The indices of the devices it holds (`ci.devices.VISIBLE_ENV` numbering); none for
    # a CPU job (a forced one where its platform has no device included).
    devices: tuple[int, ...] = ()

    @property
    def runs(self) -> bool:
        return self.command is not None

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


def placement(step: TierStep, options: Options) -> tuple[str, tuple[Device, ...]]:
    """(why the step does not run here, "" when it does; the devices it runs on).

    A GPU step runs on the first `cards` devices of its platform in the inventory,
    those whose name has its SKU first; with --exact-sku only on those. Else it runs
    only with --force, on the same accounting: the `cards` it asks for (1 when its
    hardware names no count) of any SKU, else every device of its platform there is
    (fewer than it asks for; none: a CPU job), and the reason says what the host has.
    --cpu-only leaves a GPU step no device. So a job gets other devices by planning it
    against an inventory of only those.
    """
    if step.skip_reason or step.runs_on_cpu:
        return step.skip_reason, ()
    have = () if options.cpu_only else options.inventory.of(step.platform)
    sku = step.sku.lower()
    ranked = sorted(have, key=lambda d: sku not in d.name.lower())  # stable: tool order
    fits = [d for d in ranked if not options.exact_sku or sku in d.name.lower()]
    if step.cards and len(fits) >= step.cards:
        return "", tuple(fits[: step.cards])
    if options.force:
        return "", tuple(ranked[: step.cards or 1])
    if options.cpu_only or not step.cards:
        return step.need, ()
    narrowed = options.inventory.narrowed_by.get(step.platform)
    by = f" ({narrowed})" if narrowed else ""
    if not have:
        return f"{step.need}: no {step.platform} devices here{by}", ()
    why = f"{step.need}: this host has {options.inventory.summary(step.platform)}{by}"
    return why + (" (--exact-sku)" if len(have) >= step.cards else ""), ()


def where(step: TierStep, devices: Sequence[Device]) -> str:
    """`h100_1 on NVIDIA H200`: the hardware CI names, and the device it gets here (a
    forced job on fewer than it asks for: `h100_2 on NVIDIA H100 (--force: 1 of 2)`)."""
    if not devices:
        return ""
    short = f" (--force: {len(devices)} of {step.cards})" if len(devices) < step.cards else ""
    return f"{step.hardware} on {devices[0].name}{short}"


def expected_gpus(step: TierStep, devices: Sequence[Device]) -> int:
    """VLLM_CI_EXPECTED_GPU_COUNT: what the step asks for when it holds devices (a forced
    job on fewer too: the step's own pre-flight decides); 0, the no-GPU pre-flight, when
    it holds none (a CPU job)."""
    return (step.cards or len(devices)) if devices else 0


def plan_step(step: TierStep, position: int, options: Options) -> list[Job]:
    """The jobs of one step: one per shard; not-run jobs carry their reason."""
    shards: Sequence[int | None] = list(range(step.parallelism)) if step.parallelism > 1 else [None]
    return [plan_job(step, position, shard, options) for shard in shards]


def plan_job(step: TierStep, position: int, shard: int | None, options: Options) -> Job:
    """One shard of the step, on the devices `placement` gives it (or with why it does not
    run). Planned again against an inventory of other devices, it runs on those."""
    name = shard_label(step.label, shard, step.parallelism)
    reason, devices = placement(step, options)
    if reason:
        return Job(step, position, name, shard, reason=reason)
    workdir = options.repo if options.native else WORKDIRS[step.platform]
    checkout = {"BUILDKITE_BUILD_CHECKOUT_PATH": workdir, "BUILDKITE_COMMIT": options.commit}
    rocm = step.platform is Platform.ROCM
    indices = tuple(d.index for d in devices)
    # A job that holds no device (CPU-runnable, or forced where its platform has none)
    # is shown none, natively and in a container (its image may run GPU-enabled).
    device_env, device_args = assigned(step.platform, indices) if indices else (hidden(), ())
    # rocm: the AMD template's job env and TEST_COMMANDS; else the step's env and commands.
    if rocm:
        raw = {**step.raw, "working_dir": step.raw.get("working_dir") or workdir}
        env = {str(k): str(v) for k, v in render_step(raw, dict(step.file_env))["env"].items()}
        commands: str | tuple[str, ...] = unescape(env.pop("TEST_COMMANDS"))
        env["VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE"] = "0"  # no persistent volume is mounted here
    else:
        env, commands = dict(step.env), step.job_commands
    program = render_program(SHELLS[step.platform], commands)
    context = {**options.environ, **checkout}  # env values interpolated as the upload does
    env = {k: upload_interpolate(v, lambda name, _t: context.get(name, "")) for k, v in env.items()}
    env["VLLM_CI_EXPECTED_GPU_COUNT"] = str(expected_gpus(step, devices))
    if options.native or not indices:  # in a container, a GPU job's devices start at 0
        env |= device_env
    if "HF_HOME" in env and rocm:  # the pods' HF_HOME is not this user's to create
        home = options.environ.get("HOME", "/tmp") if options.native else CONTAINER_HOME
        native = options.native and options.environ.get("HF_HOME")
        env["HF_HOME"] = native or str(Path(home) / ".cache" / "huggingface")
    env |= {**checkout, "BUILDKITE_LABEL": name}
    if step.key:
        env["BUILDKITE_STEP_KEY"] = step.key
    if shard is not None:
        env["BUILDKITE_PARALLEL_JOB"] = str(shard)
        env["BUILDKITE_PARALLEL_JOB_COUNT"] = str(step.parallelism)
    suffix = "" if shard is None else f"-shard{shard + 1}"
    log = Path(options.results, step.platform, f"{position:02d}-{_slug(step.label)}{suffix}.log")
    # The same path in a container.
    junit = options.scratch and options.scratch / f"{step.platform}-{position:02d}{suffix}.junit"
    if junit:
        native = options.environ.get("PYTEST_ADDOPTS", "") * options.native
        xml = shlex.quote(f"--junitxml={junit}/junit-${{VLLM_OMNI_CI_PYTEST}}.xml")
        env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', native)} {xml}".strip()
        env["BASH_ENV"] = str(junit / "count.sh")
    image = container = ""
    inner: tuple[str, ...] = ("bash", "-c", program)
    if not options.native:
        # The tag `build-image` gives the commit (npu: the variant of the step's preset).
        image = options.image or ci_image(
            step.platform, options.commit, options.environ, step.hardware
        )
        container = f"vllm-omni-ci-tier-{step.tier}-{step.platform}-{options.run_id}-{position}"
        container += suffix
        labels = (f"{CONTAINER_LABEL}={step.tier}", f"{CONTAINER_LABEL}.run={options.run_id}")
        inner = (
            *(options.docker, "run", "--rm", "--name", container),
            *(word for label in (*labels, *options.label) for word in ("--label", label)),
            *("--entrypoint", "bash", "-v", f"{options.repo}:{workdir}", "-w", workdir),
            *("--user", f"{os.getuid()}:{os.getgid()}", "-e", f"HOME={CONTAINER_HOME}"),
            *(w for g in os.getgroups() if g != os.getgid() for w in ("--group-add", str(g))),
            *device_args,
            *(("-v", f"{junit}:{junit}") if junit else ()),
            # The values travel in the client's environment, never in argv.
            *(word for name in env for word in ("-e", name)),
            *(image, "-c", program),
        )
    command = Command(
        inner,
        description=name,
        env=env,
        cwd=options.repo if options.native else None,
        timeout=None if step.timeout_minutes is None else step.timeout_minutes * 60.0,
    )
    return Job(
        step, position, name, shard, "", env, program, image, container, log, command, junit,
        where(step, devices), indices,
    )  # fmt: skip


def select(steps: Sequence[TierStep], text: str) -> list[tuple[int, TierStep]]:
    """(position, step) of the steps whose label contains `text` (all when empty)."""
    return [(i, s) for i, s in enumerate(steps, 1) if not text or text in s.label]


def plan_tier(steps: Sequence[TierStep], options: Options) -> list[Job]:
    chosen = select(steps, options.step)
    return [job for position, step in chosen for job in plan_step(step, position, options)]
