"""NPU CI images: `buildctl build` against the shared remote buildkitd (mTLS).

Replaces `.buildkite/npu/scripts/build-npu-image.sh`. The buildctl argv is
the script's, flag for flag; what changed is around it: the tag and device
suffix come from one variant row, inputs are checked before anything runs,
and buildctl is downloaded only when asked (`--install-buildctl`).

The planner (`plan`) is pure; `build` resolves inputs, checks them, and runs
the plan through the door. A dry-run needs neither buildctl nor the TLS files.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ci import door
from ci.errors import BAD_INPUT, UserError
from ci.images import deadline, refs, variants
from ci.images.options import BuildOptions
from ci.images.resolve import gather
from ci.images.variants import NpuVariant
from ci.target import resolve_commit, resolve_repo

DEFAULT_IMAGE_NAME = variants.IMAGE_NAME
DEFAULT_IMAGE_REGISTRY = variants.IMAGE_REGISTRY
DEFAULT_BUILDKITD_ADDR = variants.BUILDKITD_ADDR
DEFAULT_TLS_DIR = "/home/user/.docker"
DEFAULT_DOCKER_CONFIG = "/home/user/.docker/config.json"
TLS_FILES = (("ca.pem", "--tlscacert"), ("cert.pem", "--tlscert"), ("key.pem", "--tlskey"))

# The script's buildctl download; `--install-buildctl` opts in to it.
BUILDKIT_VERSION = "v0.29.0"
BUILDKIT_URL = "https://github.com/moby/buildkit/releases/download/{version}/buildkit-{version}.linux-{arch}.tar.gz"
DOWNLOAD_TO = "/tmp/buildkit.tar.gz"
EXTRACT_TO = "/tmp/buildkit"
DEFAULT_INSTALL_DIR = "/usr/local/bin"
INSTALL_DIR_ENV = "VLLM_OMNI_CI_BUILDCTL_DIR"
# `=1` is --install-buildctl: the bootstrap generates the NPU image steps, so a
# pipeline opts in through the image step's env (kept by the bootstrap), not a flag.
INSTALL_ENV = "VLLM_OMNI_CI_INSTALL_BUILDCTL"
_ARCHES = {"aarch64": "arm64", "arm64": "arm64", "x86_64": "amd64", "amd64": "amd64"}

_DOMAIN = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY_RE = re.compile(rf"{_DOMAIN}(?::[0-9]+)?(?:/{_COMPONENT})*")
_NAME_RE = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_ADDR_RE = re.compile(r"[a-z][a-z0-9+.-]*://\S+")


@dataclass(frozen=True)
class NpuSettings:
    """Where the image goes and how buildctl reaches buildkitd (the script's env)."""

    image_name: str = DEFAULT_IMAGE_NAME
    image_registry: str = DEFAULT_IMAGE_REGISTRY
    buildkitd_addr: str = DEFAULT_BUILDKITD_ADDR
    tls_dir: str = DEFAULT_TLS_DIR
    docker_config: str = DEFAULT_DOCKER_CONFIG

    @classmethod
    def resolve(cls, options: BuildOptions, env: Mapping[str, str]) -> NpuSettings:
        """Flags first, then the script's env vars (unset or empty = default)."""
        return cls(
            image_name=env.get("IMAGE_NAME") or DEFAULT_IMAGE_NAME,
            image_registry=options.registry or env.get("IMAGE_REGISTRY") or DEFAULT_IMAGE_REGISTRY,
            buildkitd_addr=env.get("BUILDKITD_ADDR") or DEFAULT_BUILDKITD_ADDR,
            tls_dir=options.tls_dir or DEFAULT_TLS_DIR,
            docker_config=options.docker_config or DEFAULT_DOCKER_CONFIG,
        )

    def tls_file(self, name: str) -> str:
        return str(PurePosixPath(self.tls_dir) / name)

    @property
    def docker_config_dir(self) -> str:
        """DOCKER_CONFIG: buildctl reads push credentials from this directory."""
        return str(PurePosixPath(self.docker_config).parent)


@dataclass(frozen=True)
class NpuBuild:
    """One resolved NPU image build."""

    variant: NpuVariant
    tag: str
    dockerfile: str
    repo: str
    settings: NpuSettings
    push: bool = True

    @property
    def image_ref(self) -> str:
        return refs.image_ref(
            f"{self.settings.image_registry}/{self.settings.image_name}", self.tag
        )


def problems(build: NpuBuild) -> list[str]:
    """Everything wrong with the inputs, without touching the machine beyond the repo."""
    found = []
    s = build.settings
    if not _REGISTRY_RE.fullmatch(s.image_registry):
        found.append(f"IMAGE_REGISTRY: {s.image_registry!r} is not a registry (host[:port][/path])")
    if not _NAME_RE.fullmatch(s.image_name):
        found.append(f"IMAGE_NAME: {s.image_name!r} is not an image name (lowercase path)")
    if not _TAG_RE.fullmatch(build.tag):
        found.append(
            f"--tag: {build.tag!r} is not an image tag ([A-Za-z0-9_][A-Za-z0-9_.-], max 128)"
        )
    if not _ADDR_RE.fullmatch(s.buildkitd_addr):
        found.append(
            f"BUILDKITD_ADDR: {s.buildkitd_addr!r} is not an address (e.g. tcp://host:1234)"
        )
    dockerfile = Path(build.repo) / "docker" / build.dockerfile
    if not build.dockerfile or not dockerfile.is_file():
        found.append(
            f"--dockerfile: {build.dockerfile!r} is not a file in {Path(build.repo) / 'docker'}"
        )
    return found


def missing_credentials(settings: NpuSettings) -> list[str]:
    """TLS and docker-config files that do not exist (checked by name only, never read)."""
    found = []
    for name, _flag in TLS_FILES:
        path = settings.tls_file(name)
        if not os.path.isfile(path):
            found.append(f"--tls-dir: {path} does not exist (buildkitd mTLS file)")
    if not os.path.isfile(settings.docker_config):
        found.append(f"--docker-config: {settings.docker_config} does not exist (push credentials)")
    return found


def buildctl_argv(build: NpuBuild, buildctl: str = "buildctl") -> tuple[str, ...]:
    """The script's buildctl command line, flag for flag."""
    s = build.settings
    argv = [buildctl, f"--addr={s.buildkitd_addr}"]
    argv += [f"{flag}={s.tls_file(name)}" for name, flag in TLS_FILES]
    argv += [
        "build",
        "--frontend",
        "dockerfile.v0",
        "--local",
        "context=.",
        "--local",
        "dockerfile=./docker",
        "--opt",
        f"filename={build.dockerfile}",
    ]
    for key, value in build.variant.build_args():
        argv += ["--opt", f"build-arg:{key}={value}"]
    argv += [
        "--secret",
        f"id=dockerconfig,src={s.docker_config}",
        "--output",
        f"type=image,name={build.image_ref},push={'true' if build.push else 'false'}",
        "--progress=plain",
    ]
    return tuple(argv)


def download_arch(machine: str) -> str:
    arch = _ARCHES.get(machine.lower())
    if arch is None:
        raise UserError(
            f"--install-buildctl: no buildctl download for machine {machine!r} "
            f"(known: {', '.join(sorted(_ARCHES))})",
            code=BAD_INPUT,
        )
    return arch


def download_url(arch: str) -> str:
    return BUILDKIT_URL.format(version=BUILDKIT_VERSION, arch=arch)


def install_commands(arch: str, install_dir: str) -> tuple[door.Command, ...]:
    """The script's download of buildctl, step by step."""
    url = download_url(arch)
    return (
        door.Command(("mkdir", "-p", EXTRACT_TO), description=f"create {EXTRACT_TO}"),
        door.Command(
            ("wget", "-q", url, "-O", DOWNLOAD_TO),
            description=f"download BuildKit {BUILDKIT_VERSION} ({arch}) to {DOWNLOAD_TO}",
        ),
        door.Command(
            ("tar", "-xzf", DOWNLOAD_TO, "-C", EXTRACT_TO),
            description=f"extract it into {EXTRACT_TO}",
        ),
        door.Command(
            ("cp", f"{EXTRACT_TO}/bin/buildctl", f"{install_dir.rstrip('/')}/"),
            description=f"install buildctl into {install_dir}",
        ),
    )


def plan(
    build: NpuBuild,
    *,
    install: tuple[door.Command, ...] = (),
    buildctl: str = "buildctl",
    extra_facts: tuple[tuple[str, str], ...] = (),
) -> door.Plan:
    s = build.settings
    command = door.Command(
        buildctl_argv(build, buildctl),
        description=f"build and push NPU image {build.variant.name}: {build.image_ref}",
        env={"DOCKER_CONFIG": s.docker_config_dir},
        cwd=build.repo,
    )
    facts = (
        ("variant", build.variant.name),
        ("image", build.image_ref),
        ("dockerfile", build.dockerfile),
        ("buildkitd", s.buildkitd_addr),
        *extra_facts,
    )
    return door.Plan(commands=(*install, command), facts=facts, title="NPU CI image (buildctl)")


def resolve(options: BuildOptions, env: Mapping[str, str]) -> NpuBuild:
    """Turn the task's options and the environment into one checked build (all problems at once)."""
    found = options.misplaced()
    row = gather(found, lambda: variants.variant(options.variant))
    repo = gather(found, lambda: resolve_repo(options.repo or None))
    if repo is None:  # nothing else can be checked without the checkout
        UserError.collect(found, code=BAD_INPUT)
    assert repo is not None
    commit = options.commit
    if not options.tag:
        commit = gather(found, lambda: resolve_commit(repo, commit, env, code=BAD_INPUT)) or ""
    # After a bad --variant or commit, the other inputs are still checked (a2, placeholder).
    row_or_default = row or variants.variant("")
    build = NpuBuild(
        variant=row_or_default,
        tag=options.tag or row_or_default.image_tag(commit or "commit"),
        dockerfile=options.dockerfile or row_or_default.dockerfile,
        repo=str(repo),
        settings=NpuSettings.resolve(options, env),
        push=options.push,
    )
    UserError.collect([*found, *problems(build)], code=BAD_INPUT)
    return build


def build(options: BuildOptions) -> None:
    env = dict(os.environ)
    job = resolve(options, env)
    found = shutil.which("buildctl", path=env.get("PATH", os.defpath))
    install_dir = os.path.abspath(env.get(INSTALL_DIR_ENV) or DEFAULT_INSTALL_DIR)
    wanted = options.install_buildctl or env.get(INSTALL_ENV) == "1"
    install: tuple[door.Command, ...] = ()
    buildctl = "buildctl"
    url = ""
    facts: tuple[tuple[str, str], ...] = ()
    if found is None and wanted:
        import platform

        arch = download_arch(platform.machine())
        url = download_url(arch)
        install = install_commands(arch, install_dir)
        buildctl = os.path.join(install_dir, "buildctl")
        facts = (("buildctl", f"not on PATH; --install-buildctl downloads {url}"),)
    elif found is None:
        facts = (("buildctl", "not on PATH: a real run stops (pass --install-buildctl)"),)

    if options.dry_run:
        door.execute(plan(job, install=install, buildctl=buildctl, extra_facts=facts), dry_run=True)
        return

    problems_found = missing_credentials(job.settings)
    if found is None and not wanted:
        problems_found.insert(
            0,
            "buildctl: not found on PATH; install BuildKit's buildctl, or pass --install-buildctl "
            f"(or set {INSTALL_ENV}=1) to download {BUILDKIT_VERSION} into {install_dir}",
        )
    UserError.collect(problems_found, code=BAD_INPUT)

    door.note("--- Building and pushing NPU Test Image")
    door.note(f"Image: {job.image_ref}")
    door.note(f"Dockerfile: {job.dockerfile}")
    if install:
        door.note(
            f"buildctl is not on PATH; --install-buildctl: downloading {url} to {DOWNLOAD_TO}, "
            f"extracting it into {EXTRACT_TO}, copying {EXTRACT_TO}/bin/buildctl to {buildctl} "
            "(no checksum is verified, as before)"
        )
    code = door.execute(plan(job, install=install, buildctl=buildctl), runner=deadline.step)
    if code != 0:
        raise door.CommandFailed(code, f"error: NPU image build failed (exit {code})")
    door.note("--- Image pushed successfully")
    sys.stdout.write(job.image_ref + "\n")
