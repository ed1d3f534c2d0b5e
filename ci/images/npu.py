"""NPU CI images: `buildctl build` against the shared remote buildkitd (mTLS).

Replaces `.buildkite/npu/scripts/build-npu-image.sh`, its buildctl argv flag for
flag; the tag and device suffix come from one variant row, and buildctl is
downloaded only when asked (`--install-buildctl`). A dry-run needs neither
buildctl nor the TLS files.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ci import door
from ci.errors import UserError
from ci.images import deadline, refs, variants
from ci.images.options import BuildOptions, gather
from ci.images.variants import NpuVariant
from ci.target import resolve_commit, resolve_repo

DEFAULT_TLS_DIR = "/home/user/.docker"
DEFAULT_DOCKER_CONFIG = "/home/user/.docker/config.json"
TLS_FILES = (("ca.pem", "--tlscacert"), ("cert.pem", "--tlscert"), ("key.pem", "--tlskey"))

# The script's buildctl download; `--install-buildctl` opts in to it.
BUILDKIT_VERSION = "v0.29.0"
BUILDKIT_URL = f"https://github.com/moby/buildkit/releases/download/{BUILDKIT_VERSION}/buildkit-{BUILDKIT_VERSION}.linux-{{arch}}.tar.gz"
DOWNLOAD_TO = "/tmp/buildkit.tar.gz"
EXTRACT_TO = "/tmp/buildkit"
DEFAULT_INSTALL_DIR = "/usr/local/bin"
INSTALL_DIR_ENV = "VLLM_OMNI_CI_BUILDCTL_DIR"
# `=1` is --install-buildctl: the bootstrap generates the NPU image steps, so a
# pipeline opts in through the image step's env (kept by the bootstrap), not a flag.
INSTALL_ENV = "VLLM_OMNI_CI_INSTALL_BUILDCTL"
_ARCHES = {"aarch64": "arm64", "arm64": "arm64", "x86_64": "amd64", "amd64": "amd64"}
_REGISTRY_RE = re.compile(rf"{refs.HOST.pattern}(?:/{refs.PATH.pattern})?")
_ADDR_RE = re.compile(r"[a-z][a-z0-9+.-]*://\S+")


@dataclass(frozen=True)
class NpuBuild:
    """One resolved NPU image build; registry, name and buildkitd are the script's env."""

    variant: NpuVariant
    tag: str
    dockerfile: str
    repo: str
    push: bool = True
    image_name: str = variants.IMAGE_NAME
    image_registry: str = variants.IMAGE_REGISTRY
    buildkitd_addr: str = variants.BUILDKITD_ADDR
    tls_dir: str = DEFAULT_TLS_DIR
    docker_config: str = DEFAULT_DOCKER_CONFIG

    @property
    def image_ref(self) -> str:
        return refs.image_ref(f"{self.image_registry}/{self.image_name}", self.tag)

    def tls_file(self, name: str) -> str:
        return str(PurePosixPath(self.tls_dir) / name)


def buildctl_argv(build: NpuBuild, buildctl: str = "buildctl") -> tuple[str, ...]:
    """The script's buildctl command line, flag for flag."""
    return (
        buildctl,
        f"--addr={build.buildkitd_addr}",
        *(f"{flag}={build.tls_file(name)}" for name, flag in TLS_FILES),
        *("build", "--frontend", "dockerfile.v0", "--local", "context=.", "--local"),
        *("dockerfile=./docker", "--opt", f"filename={build.dockerfile}"),
        *(w for k, v in build.variant.build_args() for w in ("--opt", f"build-arg:{k}={v}")),
        *("--secret", f"id=dockerconfig,src={build.docker_config}", "--output"),
        f"type=image,name={build.image_ref},push={'true' if build.push else 'false'}",
        "--progress=plain",
    )


def download_arch(machine: str) -> str:
    arch = _ARCHES.get(machine.lower())
    if arch is None:
        raise UserError(
            f"--install-buildctl: no buildctl download for machine {machine!r} "
            f"(known: {', '.join(sorted(_ARCHES))})"
        )
    return arch


def install_commands(arch: str, install_dir: str) -> tuple[door.Command, ...]:
    """The script's download of buildctl, step by step: (argv, description) rows."""
    steps = (
        (("mkdir", "-p", EXTRACT_TO), f"create {EXTRACT_TO}"),
        (
            ("wget", "-q", BUILDKIT_URL.format(arch=arch), "-O", DOWNLOAD_TO),
            f"download BuildKit {BUILDKIT_VERSION} ({arch}) to {DOWNLOAD_TO}",
        ),
        (("tar", "-xzf", DOWNLOAD_TO, "-C", EXTRACT_TO), f"extract it into {EXTRACT_TO}"),
        (
            ("cp", f"{EXTRACT_TO}/bin/buildctl", f"{install_dir.rstrip('/')}/"),
            f"install buildctl into {install_dir}",
        ),
    )
    return tuple(door.Command(argv, description=why) for argv, why in steps)


def plan(
    build: NpuBuild,
    *,
    install: tuple[door.Command, ...] = (),
    buildctl: str = "buildctl",
    extra_facts: tuple[tuple[str, str], ...] = (),
) -> door.Plan:
    command = door.Command(
        buildctl_argv(build, buildctl),
        description=f"build and push NPU image {build.variant.name}: {build.image_ref}",
        # buildctl reads the push credentials from DOCKER_CONFIG, a directory.
        env={"DOCKER_CONFIG": str(PurePosixPath(build.docker_config).parent)},
        cwd=build.repo,
    )
    facts = (
        ("variant", build.variant.name),
        ("image", build.image_ref),
        ("dockerfile", build.dockerfile),
        ("buildkitd", build.buildkitd_addr),
        *extra_facts,
    )
    return door.Plan(commands=(*install, command), facts=facts, title="NPU CI image (buildctl)")


def resolve(options: BuildOptions, env: Mapping[str, str]) -> NpuBuild:
    """Turn the task's options and the environment into one checked build (all problems at once)."""
    found = options.misplaced()
    row = gather(found, lambda: variants.variant(options.variant))
    repo = gather(found, lambda: resolve_repo(options.repo or None))
    if repo is None:  # nothing else can be checked without the checkout
        UserError.collect(found)
    assert repo is not None
    commit = options.commit
    if not options.tag:
        commit = gather(found, lambda: resolve_commit(repo, commit, env)) or ""
    # After a bad --variant or commit, the other inputs are still checked (a2, placeholder).
    row = row or variants.variant("")
    build = NpuBuild(
        variant=row,
        tag=options.tag or row.image_tag(commit or "commit"),
        dockerfile=options.dockerfile or row.dockerfile,
        repo=str(repo),
        push=options.push,
        # The script's env (unset or empty: its default); --registry moves the registry too.
        image_name=env.get("IMAGE_NAME") or variants.IMAGE_NAME,
        image_registry=options.registry or env.get("IMAGE_REGISTRY") or variants.IMAGE_REGISTRY,
        buildkitd_addr=env.get("BUILDKITD_ADDR") or variants.BUILDKITD_ADDR,
        tls_dir=options.tls_dir or DEFAULT_TLS_DIR,
        docker_config=options.docker_config or DEFAULT_DOCKER_CONFIG,
    )
    docker = Path(build.repo) / "docker"  # only the repo is read, nothing else on the machine
    checks = (
        (_REGISTRY_RE, build.image_registry, "IMAGE_REGISTRY", "a registry (host[:port][/path])"),
        (refs.PATH, build.image_name, "IMAGE_NAME", "an image name (lowercase path)"),
        (refs.TAG, build.tag, "--tag", "an image tag ([A-Za-z0-9_][A-Za-z0-9_.-], max 128)"),
        (_ADDR_RE, build.buildkitd_addr, "BUILDKITD_ADDR", "an address (e.g. tcp://host:1234)"),
    )
    found += [f"{src}: {v!r} is not {what}" for rx, v, src, what in checks if not rx.fullmatch(v)]
    # os.path's test: False, not an OSError, for a name the system refuses (too long).
    if not build.dockerfile or not os.path.isfile(docker / build.dockerfile):
        found.append(f"--dockerfile: {build.dockerfile!r} is not a file in {docker}")
    UserError.collect(found)
    return build


def build(options: BuildOptions) -> None:
    env = dict(os.environ)
    job = resolve(options, env)
    install_dir = os.path.abspath(env.get(INSTALL_DIR_ENV) or DEFAULT_INSTALL_DIR)
    wanted = options.install_buildctl or env.get(INSTALL_ENV) == "1"
    missing = shutil.which("buildctl", path=env.get("PATH", os.defpath)) is None
    buildctl, url = "buildctl", ""
    install: tuple[door.Command, ...] = ()
    fact = "not on PATH: a real run stops (pass --install-buildctl)"
    if missing and wanted:
        arch = download_arch(platform.machine())
        url, install = BUILDKIT_URL.format(arch=arch), install_commands(arch, install_dir)
        buildctl = os.path.join(install_dir, "buildctl")
        fact = f"not on PATH; --install-buildctl downloads {url}"
    facts = (("buildctl", fact),) if missing else ()
    the_plan = plan(job, install=install, buildctl=buildctl, extra_facts=facts)
    if options.dry_run:
        door.execute(the_plan, dry_run=True)
        return
    # The TLS and docker-config files are checked by name only, never read.
    needed = [(job.tls_file(name), "--tls-dir", "buildkitd mTLS file") for name, _ in TLS_FILES]
    needed.append((job.docker_config, "--docker-config", "push credentials"))
    problems_found = [
        f"{flag}: {path} does not exist ({why})"
        for path, flag, why in needed
        if not os.path.isfile(path)
    ]
    if missing and not wanted:
        problems_found.insert(
            0,
            "buildctl: not found on PATH; install BuildKit's buildctl, or pass --install-buildctl "
            f"(or set {INSTALL_ENV}=1) to download {BUILDKIT_VERSION} into {install_dir}",
        )
    UserError.collect(problems_found)
    door.note("--- Building and pushing NPU Test Image")
    door.note(f"Image: {job.image_ref}")
    door.note(f"Dockerfile: {job.dockerfile}")
    if install:
        door.note(
            f"buildctl is not on PATH; --install-buildctl: downloading {url} to {DOWNLOAD_TO}, "
            f"extracting it into {EXTRACT_TO}, copying {EXTRACT_TO}/bin/buildctl to {buildctl} "
            "(no checksum is verified, as before)"
        )
    code = door.execute(the_plan, runner=deadline.step)
    if code != 0:
        raise door.CommandFailed(code, f"error: NPU image build failed (exit {code})")
    door.note("--- Image pushed successfully")
    print(job.image_ref)
