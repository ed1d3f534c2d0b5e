"""`build-image --platform rocm|cuda`: the CI images whose dependency cache is keyed by content.

Replaces the AMD and CUDA `build-ci-image.sh`: one plan, each script's own choices
in its `Recipe` (differences: docs/differences.md). The key (cachekey.py) names
the registry cache ref; the image is `<registry>:<commit>`. Two backends:

- **buildx**, the scripts' way: a docker-container builder exports the full cache
  (mode=max). Commands name it with `--builder`: `docker buildx use` would change
  the agent user's builder under other jobs.
- **engine**, `DOCKER_BUILDKIT=1 docker build` without buildx: no registry cache
  export, so the image carries an inline cache (mode=min) and is pushed again
  under the cache ref.
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci import door
from ci.errors import UserError
from ci.images import backends, cachekey, deadline, refs, registry
from ci.images.cachekey import CacheKey
from ci.images.options import BuildOptions, gather
from ci.images.registry import Target
from ci.images.steps import EnsureBuilder, SecretPipe, Step, plan_commands, run_steps
from ci.platforms import Platform
from ci.target import resolve_commit, resolve_repo

ARCH_ENV = "PYTORCH_ROCM_ARCH"
DEFAULT_ARCH = "gfx942"
# An existing buildx builder to use instead of the platform's own (for example the
# engine's `docker`-driver builder where the docker-container driver's image cannot
# be pulled); the inspect -> create sequence stays, so a missing one is still created.
BUILDX_BUILDER_ENV = "VLLM_OMNI_CI_BUILDX_BUILDER"
ECR_PUBLIC = "public.ecr.aws"
ECR_REGION = "us-east-1"


@dataclass(frozen=True)
class Recipe:
    """What one platform's script does its own way."""

    title: str
    builder: str  # the script's buildx builder (docker-container driver)
    bootstrap: bool  # `docker buildx inspect --bootstrap` after creating it
    dockerfile: str
    cache_tag: str  # the cache ref's tag; `{key}` is the cache key
    registry_env: str  # the script's registry variable ("": a constant, moved by --registry only)
    default_registry: str
    key: Callable[[Path, str], CacheKey]  # (repo, arch)
    target: str | None = None
    pull: bool = False  # `--pull` the base image (when pushing)
    tag_flag: str = "--tag"
    # ROCm's cache export may fail (`ignore-error=true`), the image is still out; CUDA's may not.
    cache_to: tuple[str, ...] = ("mode=max", "compression=zstd")


RECIPES = {
    Platform.ROCM: Recipe(
        title="ROCm CI image",
        builder="vllm-omni-rocm-builder",
        bootstrap=True,
        dockerfile="docker/Dockerfile.rocm",
        cache_tag="rocm-deps-cache-{key}",
        registry_env=refs.ROCM_REGISTRY_ENV,
        default_registry=refs.ROCM_REGISTRY,
        key=cachekey.rocm_key,
        target="test",
        pull=True,
        cache_to=("mode=max", "compression=zstd", "ignore-error=true"),
    ),
    Platform.CUDA: Recipe(
        title="CUDA CI image",
        builder="vllm-omni-builder",
        bootstrap=False,
        dockerfile="docker/Dockerfile.ci",
        cache_tag="deps-cache-{key}",
        registry_env="",
        default_registry=refs.CUDA_REGISTRY,
        key=lambda repo, _arch: cachekey.cuda_key(repo),
        tag_flag="-t",
    ),
}


def ecr_login(docker: str, namespace: str, cwd: str | None = None) -> SecretPipe:
    """`aws ecr-public get-login-password | docker login --password-stdin`.

    The password travels from the first command's captured stdout to the
    second's stdin: never in argv, and masked in every line once known.
    """
    return SecretPipe(
        door.Command(
            ("aws", "ecr-public", "get-login-password", "--region", ECR_REGION),
            description="get the ECR Public login password",
            cwd=cwd,
        ),
        door.Command(
            (docker, "login", "--username", "AWS", "--password-stdin", namespace),
            description=f"log in to {namespace}",
            cwd=cwd,
        ),
    )


@dataclass(frozen=True, kw_only=True)
class KeyedBuild:
    """Everything the plan depends on; `plan()` is a pure function of it, so the dry-run
    prints exactly what runs."""

    recipe: Recipe
    repo: Path
    registry: str
    commit: str
    key: CacheKey
    arch: str = ""  # ROCm's PYTORCH_ROCM_ARCH (CUDA: ""), hashed and passed as a build arg
    backend: str = backends.BUILDX
    docker: str = backends.DOCKER
    push: bool = True
    choice_note: str = ""  # dry-run only: why the run would stop choosing a backend here
    builder: str = ""  # the recipe's buildx builder, or --buildx-builder's existing one
    registry_from: str = "--registry"  # where the registry came from, for messages

    @property
    def cuda(self) -> bool:
        return self.recipe is RECIPES[Platform.CUDA]

    @property
    def image_ref(self) -> str:
        return refs.image_ref(self.registry, self.commit)

    @property
    def cache_tag(self) -> str:
        return self.recipe.cache_tag.format(key=self.key.key)

    @property
    def cache_ref(self) -> str:
        return refs.image_ref(self.registry, self.cache_tag)

    @property
    def reads_remote(self) -> bool:
        """A `--no-push` build must not reach Docker Hub or ECR: no `--pull`, and a cache ref
        read only from this machine (a loopback registry, the sandbox's)."""
        return self.push or registry.on_this_machine(self.cache_ref)

    def common_flags(self) -> list[str]:
        """Both backends' flags, in the scripts' order: pull, progress, target, build args."""
        flags = ["--pull"] if self.recipe.pull and self.push else []
        flags += ["--progress=plain"]
        flags += ["--target", self.recipe.target] if self.recipe.target else []
        return flags + (["--build-arg", f"ARG_PYTORCH_ROCM_ARCH={self.arch}"] if self.arch else [])

    def buildx_steps(self) -> list[Step]:
        """inspect → create (only if inspect fails) → [bootstrap] → build, all with `--builder`.
        A create that fails because another job created the builder meanwhile is forgiven."""
        command = functools.partial(door.Command, cwd=str(self.repo))
        name, docker = self.builder, self.docker
        on = ("--builder", name)
        inspect = (docker, "buildx", "inspect", *on)
        create = (docker, "buildx", "create", *on, "--name", name, "--driver", "docker-container")
        found: list[Step] = [
            EnsureBuilder(
                command(inspect, description=f"inspect builder {name} (create it if missing)"),
                command(create, description=f"create builder {name}"),
            )
        ]
        if self.recipe.bootstrap:
            bootstrap = (*inspect, "--bootstrap")
            found.append(command(bootstrap, description=f"bootstrap builder {name}"))
        argv = [docker, "buildx", "build", *on, "--push" if self.push else "--load"]
        argv += self.common_flags()
        if self.reads_remote:
            argv += ["--cache-from", f"type=registry,ref={self.cache_ref}"]
        if self.push:
            options = ",".join(self.recipe.cache_to)
            argv += ["--cache-to", f"type=registry,ref={self.cache_ref},{options}"]
        argv += ["--file", self.recipe.dockerfile, self.recipe.tag_flag, self.image_ref, "."]
        what = "build and push" if self.push else "build and load (no push)"
        return [*found, command(tuple(argv), description=f"{what} {self.image_ref}")]

    def engine_steps(self) -> list[Step]:
        """One BuildKit build with an inline cache, tagged as image and cache ref; push both."""
        command = functools.partial(door.Command, cwd=str(self.repo))
        tag, docker = self.recipe.tag_flag, self.docker
        argv = [docker, "build", *self.common_flags(), "--build-arg", "BUILDKIT_INLINE_CACHE=1"]
        if self.reads_remote:
            argv += ["--cache-from", self.cache_ref]
        argv += ["--file", self.recipe.dockerfile, tag, self.image_ref]
        argv += [tag, self.cache_ref, "."] if self.push else ["."]
        what = "build with inline cache" if self.push else "build locally (no push)"
        build = command(
            tuple(argv), description=f"{what} {self.image_ref}", env={"DOCKER_BUILDKIT": "1"}
        )
        if not self.push:
            return [build]
        optional = "ignore-error=true" in self.recipe.cache_to
        return [
            build,
            command((docker, "push", self.image_ref), description=f"push {self.image_ref}"),
            command(
                (docker, "push", self.cache_ref),
                description=f"push {self.cache_ref}",
                tolerate="warning: cache export failed (exit {code}); the image is pushed"
                if optional
                else None,
            ),
        ]

    def login(self) -> list[Step]:
        """CUDA only, as its script: log in to the ECR Public namespace (`public.ecr.aws/<alias>`)
        it pushes to; no login for other registries."""
        parts = self.registry.split("/")
        if not self.cuda or parts[0] != ECR_PUBLIC or len(parts) < 3 or not self.push:
            return []
        return [ecr_login(self.docker, "/".join(parts[:2]), cwd=str(self.repo))]

    def steps(self) -> list[Step]:
        return self.buildx_steps() if self.backend == backends.BUILDX else self.engine_steps()

    def describe_backend(self) -> str:
        if self.backend == backends.BUILDX:
            return f"buildx (builder {self.builder})"
        return "engine (DOCKER_BUILDKIT=1 docker build; inline cache, mode=min)"

    def registry_target(self) -> Target | None:
        return registry.target(self.image_ref, self.cache_ref, self.push)

    def plan(self) -> door.Plan:
        login = plan_commands(self.login())
        facts = (
            ("cache key", self.cache_tag if self.cuda else self.key.key),
            ("key inputs", ", ".join(self.key.inputs)),
            *((("arch", self.arch),) if self.arch else ()),
            ("cache ref", self.cache_ref),
            ("image", self.image_ref),
            ("backend", self.describe_backend()),
            ("push", "yes" if self.push else "no (--no-push)"),
            *((("note", self.choice_note),) if self.choice_note else ()),
            ("note", registry.plan_note(self.registry_target())),
            *((("login", login[1].argv[-1] if login else "none"),) if self.cuda else ()),
        )
        return door.Plan((*login, *plan_commands(self.steps())), facts, title=self.recipe.title)


def setting(
    flag: str, flag_name: str, env: Mapping[str, str], var: str, default: str
) -> tuple[str, str]:
    """(value, source): the flag, then the env var (empty counts as unset), then the default.
    Messages name the flag as the default's source: the place to change it."""
    if env.get(var) and not flag:
        return env[var], var
    return flag or default, flag_name


def prepare(options: BuildOptions, env: Mapping[str, str] | None = None) -> KeyedBuild:
    """Resolve and check every input before any command: every problem at once, exit 2."""
    env = os.environ if env is None else env
    recipe = RECIPES[options.platform]
    problems = options.misplaced()
    requested = gather(problems, lambda: backends.parse_builder(options.builder))
    builder_name, builder_from = setting(
        options.buildx_builder, "--buildx-builder", env, BUILDX_BUILDER_ENV, ""
    )
    if builder_name and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", builder_name):
        problems.append(
            f"{builder_from}: {builder_name!r} is not a builder name"
            " (allowed: letters, digits, '_', '.', '-'; see `docker buildx ls`)"
        )
    if builder_name and options.builder == backends.ENGINE:
        problems.append(f"{builder_from}: applies to --builder buildx or auto only")
    image_registry, registry_from = setting(
        options.registry, "--registry", env, recipe.registry_env, recipe.default_registry
    )
    problems += filter(None, [refs.repository_problem(image_registry, registry_from)])
    arch, arch_from = "", ""
    if options.platform is Platform.ROCM:
        arch, arch_from = setting(options.arch, "--arch", env, ARCH_ENV, DEFAULT_ARCH)
    repo = gather(problems, lambda: resolve_repo(options.repo or None))
    commit = key = None
    if repo is not None:
        commit = gather(problems, lambda: resolve_commit(repo, options.commit or None, env))
        source = setting(options.commit, "--commit", env, "BUILDKITE_COMMIT", "")[1]
        problems += filter(None, [commit and refs.tag_problem(commit, source)])
        key = gather(problems, lambda: recipe.key(repo, arch))
    # PYTORCH_ROCM_ARCH is used verbatim (hashed, passed as a build arg), `;` lists included;
    # whitespace or a control character would change both unseen.
    bad = sorted({c for c in arch if c.isspace() or unicodedata.category(c).startswith("C")})
    if bad:
        problems.append(
            f"{arch_from}: {arch!r} has whitespace or a control character "
            f"({', '.join(repr(c) for c in bad)}); give the "
            "targets without spaces, separated by ';' (e.g. gfx90a;gfx942)"
        )
    UserError.collect(problems)
    assert repo is not None and commit is not None and key is not None and requested
    backend, docker, note = backends.choose(requested, options.docker, dry_run=options.dry_run)
    return KeyedBuild(
        recipe=recipe,
        repo=repo,
        registry=image_registry,
        commit=commit,
        key=key,
        arch=arch,
        backend=backend,
        docker=docker,
        push=options.push,
        builder=builder_name or recipe.builder,
        choice_note=note,
        registry_from=registry_from,
    )


def build(options: BuildOptions) -> None:
    job = prepare(options)
    if options.dry_run:
        door.execute(job.plan(), dry_run=True)
        return
    # Before the login too: `docker login` to a silent registry hangs as well.
    registry.check(job.registry_target(), job.registry_from)
    if job.cuda:
        print(f"BUILDKITE_COMMIT: {job.commit}", flush=True)
        _run(job.login())
        print(f"Cache key: {job.cache_tag}\nBuilding image tag: {job.image_ref}", flush=True)
    else:
        print(f"ROCm dependency cache: {job.cache_ref}\nROCm CI image: {job.image_ref}", flush=True)
    door.note(
        f"cache key {job.key.key} over {len(job.key.inputs)} inputs: " + ", ".join(job.key.inputs)
    )
    door.note(f"backend: {job.describe_backend()} with {job.docker}")
    _run(job.steps())


def _run(steps: Sequence[Step]) -> None:
    """Run the steps under the build's deadline; a failure ends the task with its exit code."""
    run_steps(steps, runner=deadline.step)
