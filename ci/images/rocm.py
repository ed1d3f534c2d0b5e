"""`build-image --platform rocm`: replaces `.buildkite/amd/scripts/build-ci-image.sh`.

Contract: spec image-builds.md §1. The key (cachekey.rocm_key) selects the
registry cache ref; the image is `<registry>:<commit>`, target `test`. The
differences from the script (exit 2 for input errors, `--builder` instead of
`docker buildx use`, an engine backend, failing on an unhashable input) are in
docs/differences.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from ci import door
from ci.errors import IMAGE_INPUT, UserError
from ci.images import backends, cachekey
from ci.images.options import BuildOptions
from ci.images.resolve import commit_and_repo, gather, setting

REGISTRY_ENV = "ROCM_CI_IMAGE_REGISTRY"
DEFAULT_REGISTRY = "rocm/vllm-omni"
ARCH_ENV = "PYTORCH_ROCM_ARCH"
DEFAULT_ARCH = "gfx942"
DOCKERFILE = "docker/Dockerfile.rocm"
TARGET = "test"
BUILDER = backends.Builder("vllm-omni-rocm-builder", bootstrap=True)


@dataclass(frozen=True, kw_only=True)
class RocmBuild(backends.KeyedBuild):
    """Everything the plan depends on; `plan()` is a pure function of it."""

    arch: str

    @property
    def cache_ref(self) -> str:
        return f"{self.registry}:rocm-deps-cache-{self.key.key}"

    def spec(self) -> backends.BuildSpec:
        return backends.BuildSpec(
            repo=str(self.repo),
            dockerfile=DOCKERFILE,
            image_ref=self.image_ref,
            cache_ref=self.cache_ref,
            target=TARGET,
            build_args=(("ARG_PYTORCH_ROCM_ARCH", self.arch),),
            pull=True,
            push=self.push,
            cache_to_options=("mode=max", "compression=zstd", "ignore-error=true"),
        )

    def steps(self) -> backends.Steps:
        return backends.steps_for(self.backend, self.spec(), BUILDER, self.docker)

    def plan(self) -> door.Plan:
        facts = (
            ("cache key", self.key.key),
            ("key inputs", ", ".join(self.key.inputs)),
            ("arch", self.arch),
            ("cache ref", self.cache_ref),
            ("image", self.image_ref),
            ("backend", backends.describe(self.backend, BUILDER)),
            ("push", "yes" if self.push else "no (--no-push)"),
        )
        return door.Plan(self.steps().commands, facts, title="ROCm CI image")


def prepare(options: BuildOptions, env: Mapping[str, str] | None = None) -> RocmBuild:
    """Resolve and check every input; all problems are reported at once, before any command."""
    source = os.environ if env is None else env
    problems: list[str] = []
    requested = gather(problems, lambda: backends.parse_builder(options.builder))
    registry, registry_from = setting(
        options.registry, "--registry", source, REGISTRY_ENV, DEFAULT_REGISTRY
    )
    arch, _ = setting(options.arch, "--arch", source, ARCH_ENV, DEFAULT_ARCH)
    problems += filter(None, [backends.repository_problem(registry, registry_from)])
    repo, commit = commit_and_repo(options, source, problems)
    key = gather(problems, lambda: cachekey.rocm_key(repo, arch)) if repo else None
    UserError.collect(problems, code=IMAGE_INPUT)
    assert repo is not None and commit is not None and key is not None and requested
    backend, docker = backends.choose(requested, options.docker, dry_run=options.dry_run)
    return RocmBuild(
        repo=repo,
        registry=registry,
        arch=arch,
        commit=commit,
        key=key,
        backend=backend,
        docker=docker,
        push=options.push,
    )


def build(options: BuildOptions) -> None:
    job = prepare(options)
    plan = job.plan()
    if options.dry_run:
        door.run_plan(plan, dry_run=True)
        return
    sys.stdout.write(f"ROCm dependency cache: {job.cache_ref}\nROCm CI image: {job.image_ref}\n")
    sys.stdout.flush()
    backends.log_choice(job.key, job.backend, BUILDER, job.docker)
    backends.execute(job.steps())
