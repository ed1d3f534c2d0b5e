"""`build-image --platform cuda`: the CUDA CI image of `.buildkite/cuda/scripts/build-ci-image.sh`.

Same backends as ROCm (backends.py) with the script's own flags: builder
`vllm-omni-builder` without bootstrap, no `--pull`, no `--target`, `-t`, and a
cache export without `ignore-error`. The key is the script's recipe with the
requirements glob in C byte order (docs/differences.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ci import door
from ci.images import backends, cachekey, refs
from ci.images.options import BuildOptions
from ci.images.resolve import prepare_keyed

DEFAULT_REGISTRY = refs.CUDA_REGISTRY
ECR_PUBLIC = "public.ecr.aws"
ECR_REGION = "us-east-1"


def login_registry(registry: str) -> str | None:
    """ECR Public namespace to log in to (`public.ecr.aws/<alias>`), or None for other hosts."""
    parts = registry.split("/")
    return "/".join(parts[:2]) if parts[0] == ECR_PUBLIC and len(parts) >= 3 else None


@dataclass(frozen=True, kw_only=True)
class CudaBuild(backends.KeyedBuild):
    """Everything the plan depends on; `plan()` is a pure function of it."""

    builder = backends.Builder("vllm-omni-builder", bootstrap=False)
    dockerfile = "docker/Dockerfile.ci"

    @property
    def cache_tag(self) -> str:
        return f"deps-cache-{self.key.key}"

    @property
    def cache_ref(self) -> str:
        return f"{self.registry}:{self.cache_tag}"

    def spec(self) -> backends.BuildSpec:
        return self.build_spec(tag_flag="-t")

    def login(self) -> tuple[door.Command, door.Command] | None:
        """`aws ecr-public get-login-password | docker login --password-stdin`, as two commands.

        The password travels from the first command's captured stdout to the
        second's stdin: never in argv, and masked in every line once known.
        """
        namespace = login_registry(self.registry)
        if namespace is None or not self.push:
            return None
        password = door.Command(
            ("aws", "ecr-public", "get-login-password", "--region", ECR_REGION),
            description="get the ECR Public login password",
            cwd=str(self.repo),
            secret_output=True,
        )
        login = door.Command(
            (self.docker, "login", "--username", "AWS", "--password-stdin", namespace),
            description=f"log in to {namespace}",
            stdin="",
            stdin_secret=True,
            stdin_from_previous=True,
            cwd=str(self.repo),
        )
        return password, login

    def plan(self) -> door.Plan:
        login = self.login()
        facts = (
            ("cache key", self.cache_tag),
            ("key inputs", ", ".join(self.key.inputs)),
            ("cache ref", self.cache_ref),
            ("image", self.image_ref),
            *self.backend_facts(),
            ("login", login[1].argv[-1] if login else "none"),
        )
        return door.Plan((*(login or ()), *self.steps()), facts, title="CUDA CI image")


def prepare(options: BuildOptions, env: Mapping[str, str] | None = None) -> CudaBuild:
    """Resolve and check every input before any command; the registry is the script's
    constant, which `--registry` may change and no env var does."""
    return prepare_keyed(
        CudaBuild,
        options,
        os.environ if env is None else env,
        registry_env=None,
        default_registry=DEFAULT_REGISTRY,
        key_of=cachekey.cuda_key,
    )


def build(options: BuildOptions) -> None:
    job = prepare(options)
    if options.dry_run:
        door.execute(job.plan(), dry_run=True)
        return
    job.probe()  # before the login too: `docker login` to a silent registry hangs as well
    print(f"BUILDKITE_COMMIT: {job.commit}", flush=True)
    backends.run_steps(job.login() or ())
    print(f"Cache key: {job.cache_tag}\nBuilding image tag: {job.image_ref}", flush=True)
    job.execute()
