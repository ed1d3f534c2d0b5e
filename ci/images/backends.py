"""The two ways the ROCm and CUDA CI images are built, shared by both platforms.

- **buildx**: the old scripts' way; a docker-container builder exports the full
  BuildKit cache (mode=max). Commands name it with `--builder`, since
  `docker buildx use` would change the agent user's builder under other jobs.
- **engine**: `DOCKER_BUILDKIT=1 docker build` without the buildx plugin. It
  cannot export a registry cache, so the image carries an inline cache (mode=min)
  and is pushed a second time under the cache ref.

Planning is pure door commands, so the dry-run prints exactly what runs.
"""

from __future__ import annotations

import functools
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ci import doctor, door
from ci.errors import UserError
from ci.images import deadline, refs, registry
from ci.images.cachekey import CacheKey
from ci.images.registry import Target, on_this_machine

if TYPE_CHECKING:
    from ci.doctor import Report

AUTO, BUILDX, ENGINE = "auto", "buildx", "engine"
BUILDERS = (AUTO, BUILDX, ENGINE)
DOCKER = "docker"


def parse_builder(value: str) -> str:
    key = value.strip().lower()
    if key not in BUILDERS:
        raise UserError(
            f"--builder: unknown value {value!r}: allowed values are auto, buildx, engine"
        )
    return key


@dataclass(frozen=True)
class Builder:
    """The buildx builder instance (docker-container driver) a platform uses."""

    name: str
    bootstrap: bool = False


@dataclass(frozen=True, kw_only=True)
class KeyedBuild:
    """A CI image whose dependency cache is keyed by content (ROCm and CUDA).

    The platform modules add their own inputs and refs; the plan stays a pure
    function of these fields.
    """

    builder: ClassVar[Builder]
    dockerfile: ClassVar[str]

    repo: Path
    registry: str
    commit: str
    key: CacheKey
    backend: str = BUILDX
    docker: str = DOCKER
    push: bool = True
    choice_note: str = ""  # dry-run only: why the run would stop choosing a backend here
    builder_name: str = ""  # --buildx-builder: an existing builder to use instead of ours
    registry_from: str = "--registry"  # where the registry came from, for messages

    @property
    def buildx_builder(self) -> Builder:
        """The platform's builder, or the one named by --buildx-builder (same bootstrap rule)."""
        return Builder(self.builder_name or self.builder.name, self.builder.bootstrap)

    @property
    def image_ref(self) -> str:
        return refs.image_ref(self.registry, self.commit)

    @property
    def cache_ref(self) -> str:
        raise NotImplementedError

    def spec(self) -> BuildSpec:
        """What to build, in the platform script's terms."""
        raise NotImplementedError

    def build_spec(self, **flags: Any) -> BuildSpec:
        """The spec every keyed build shares, plus the platform script's own `flags`."""
        return BuildSpec(
            repo=str(self.repo),
            dockerfile=self.dockerfile,
            image_ref=self.image_ref,
            cache_ref=self.cache_ref,
            push=self.push,
            **flags,
        )

    def steps(self) -> tuple[door.Command, ...]:
        if self.backend == BUILDX:
            return buildx_steps(self.spec(), self.buildx_builder, self.docker)
        return engine_steps(self.spec(), self.docker)

    def backend_facts(self) -> tuple[tuple[str, str], ...]:
        return (
            ("backend", describe(self.backend, self.buildx_builder)),
            ("push", "yes" if self.push else "no (--no-push)"),
            *((("note", self.choice_note),) if self.choice_note else ()),
            ("note", registry.plan_note(self.registry_target())),
        )

    def registry_target(self) -> Target | None:
        spec = self.spec()
        return registry.target(spec.image_ref, spec.cache_ref, spec.push)

    def probe(self) -> None:
        """Before any command: the registry the build talks to answers (else exit 1)."""
        registry.check(self.registry_target(), self.registry_from)

    def execute(self) -> None:
        """Log the key's inputs and the backend for whoever reads the job log, then run."""
        door.note(
            f"cache key {self.key.key} over {len(self.key.inputs)} inputs: "
            + ", ".join(self.key.inputs)
        )
        door.note(f"backend: {describe(self.backend, self.buildx_builder)} with {self.docker}")
        run_steps(self.steps())


@dataclass(frozen=True)
class BuildSpec:
    """What to build, in the old script's terms; each backend turns it into argv.

    The buildx argv follows the scripts' `docker buildx build` lines: push,
    pull, progress, target, build args, cache-from, cache-to, file, tag, context.
    """

    repo: str
    dockerfile: str
    image_ref: str
    cache_ref: str
    target: str | None = None
    build_args: tuple[tuple[str, str], ...] = ()
    pull: bool = False
    push: bool = True
    cache_to_options: tuple[str, ...] = ("mode=max", "compression=zstd")
    tag_flag: str = "--tag"
    context: str = "."

    @property
    def reads_remote(self) -> bool:
        """A `--no-push` build is local: it must not reach Docker Hub or ECR, so it
        neither pulls its base again nor reads a cache ref off this machine
        (a loopback registry, the sandbox's, is still read)."""
        return self.push or on_this_machine(self.cache_ref)

    @property
    def pulls(self) -> bool:
        return self.pull and self.push

    def common_flags(self) -> list[str]:
        flags = ["--pull"] if self.pulls else []
        flags += ["--progress=plain", *(["--target", self.target] if self.target else [])]
        for name, value in self.build_args:
            flags += ["--build-arg", f"{name}={value}"]
        return flags


def buildx_steps(
    spec: BuildSpec, builder: Builder, docker: str = DOCKER
) -> tuple[door.Command, ...]:
    """inspect → create (only if inspect fails) → [bootstrap] → build, all with `--builder`.

    A create that fails because another job created the same builder meanwhile
    is not an error: inspecting again then succeeds.
    """
    command = functools.partial(door.Command, cwd=spec.repo)
    on = ("--builder", builder.name)
    inspect = (docker, "buildx", "inspect", *on)
    create = (docker, "buildx", "create", *on, "--name", builder.name)
    steps = [
        command(
            inspect,
            description=f"inspect builder {builder.name} (create it if missing)",
            tolerate="",
            output="null",
        ),
        command(
            (*create, "--driver", "docker-container"),
            description=f"create builder {builder.name}",
            only_after_failure=True,
            forgive_if=command(
                inspect, description="the builder was created concurrently by another job; using it"
            ),
        ),
    ]
    if builder.bootstrap:
        steps.append(
            command((*inspect, "--bootstrap"), description=f"bootstrap builder {builder.name}")
        )
    argv = [docker, "buildx", "build", *on, "--push" if spec.push else "--load"]
    argv += spec.common_flags()
    if spec.reads_remote:
        argv += ["--cache-from", f"type=registry,ref={spec.cache_ref}"]
    if spec.push:
        options = ",".join(spec.cache_to_options)
        argv += ["--cache-to", f"type=registry,ref={spec.cache_ref},{options}"]
    argv += ["--file", spec.dockerfile, spec.tag_flag, spec.image_ref, spec.context]
    what = "build and push" if spec.push else "build and load (no push)"
    steps.append(command(tuple(argv), description=f"{what} {spec.image_ref}"))
    return tuple(steps)


def engine_steps(spec: BuildSpec, docker: str = DOCKER) -> tuple[door.Command, ...]:
    """One BuildKit build with an inline cache, tagged as image and cache ref; push both."""
    command = functools.partial(door.Command, cwd=spec.repo)
    argv = [docker, "build", *spec.common_flags(), "--build-arg", "BUILDKIT_INLINE_CACHE=1"]
    if spec.reads_remote:
        argv += ["--cache-from", spec.cache_ref]
    argv += ["--file", spec.dockerfile, spec.tag_flag, spec.image_ref]
    if spec.push:
        argv += [spec.tag_flag, spec.cache_ref]
    what = "build with inline cache" if spec.push else "build locally (no push)"
    build = command(
        (*argv, spec.context),
        description=f"{what} {spec.image_ref}",
        env={"DOCKER_BUILDKIT": "1"},
    )
    if not spec.push:
        return (build,)
    # The buildx plan's `ignore-error=true` (ROCm): the cache push may fail, the image is out.
    optional = "ignore-error=true" in spec.cache_to_options
    return (
        build,
        command((docker, "push", spec.image_ref), description=f"push {spec.image_ref}"),
        command(
            (docker, "push", spec.cache_ref),
            description=f"push {spec.cache_ref}",
            tolerate="warning: cache export failed (exit {code}); the image is pushed"
            if optional
            else None,
        ),
    )


def describe(kind: str, builder: Builder) -> str:
    """The plan's `backend` fact."""
    if kind == BUILDX:
        return f"buildx (builder {builder.name})"
    return "engine (DOCKER_BUILDKIT=1 docker build; inline cache, mode=min)"


def choose(requested: str, docker: str, *, dry_run: bool = False) -> tuple[str, str, str]:
    """(backend, docker client, note), for the run and its dry-run alike.

    Both ask the clients the same read-only questions (doctor's probes, no
    engine needed), so `--dry-run` shows what the run would use here. Where the
    run would stop for want of a client, the dry-run still prints the
    production plan (`auto` is buildx), and the note says why the run would stop.
    """
    try:
        backend, client = _choose(requested, docker)
    except UserError as exc:
        if not dry_run or doctor.named_docker(docker):
            raise
        fallback = ENGINE if requested == ENGINE else BUILDX
        return fallback, DOCKER, f"the run would stop here: {exc.problems[0]}"
    return backend, client, ""


def _choose(requested: str, docker: str) -> tuple[str, str]:
    report = doctor.probe(docker or None, engine=False)
    if requested in (AUTO, BUILDX) and report.buildx and report.chosen:
        return BUILDX, as_typed(report.chosen)
    if requested == BUILDX:
        raise UserError(
            f"--builder buildx: `docker buildx` does not work with {report.chosen or 'any client'}"
            " (use --builder engine or auto)"
        )
    return ENGINE, as_typed(engine_client(report, docker, "a working `docker buildx` or "))


def as_typed(client: str) -> str:
    """`docker` when PATH's `docker` is this client (as the scripts wrote it), else its path."""
    found = shutil.which(DOCKER)
    return DOCKER if found and os.path.realpath(found) == os.path.realpath(client) else client


def engine_client(report: Report, docker: str, alternatives: str = "") -> str:
    """The client for `DOCKER_BUILDKIT=1 docker build` (ROCm/CUDA engine backend, XPU).

    A client the user named (`--docker`, $VLLM_OMNI_CI_DOCKER) is used as is,
    never swapped for another; otherwise the first able one doctor found.
    """
    if docker or os.environ.get(doctor.DOCKER_ENV):
        named = report.client()
        client = named.path if named and named.buildkit_without_buildx else None
    else:
        client = report.buildkit_client()
    if client is None:
        found = ", ".join(c.path for c in report.clients) or "none on PATH"
        raise UserError(
            f"no usable backend: no docker client with {alternatives}"
            f"`DOCKER_BUILDKIT=1 docker build` (clients: {found}; see `vllm-omni-ci doctor`)"
        )
    return client


def run_steps(steps: tuple[door.Command, ...]) -> None:
    """Run the steps under the build's deadline; a failure ends the task with its exit code."""
    door.execute(door.Plan(steps), check=True, runner=deadline.step)
