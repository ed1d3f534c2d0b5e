"""`build-image --platform rocm`: replaces `.buildkite/amd/scripts/build-ci-image.sh`.

The key (cachekey.rocm_key) selects the registry cache ref; the image is
`<registry>:<commit>`, target `test`. The differences from the script are in
docs/differences.md.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from ci import door
from ci.images import backends, cachekey, refs
from ci.images.options import BuildOptions
from ci.images.resolve import prepare_keyed, setting

ARCH_ENV = "PYTORCH_ROCM_ARCH"
DEFAULT_ARCH = "gfx942"


@dataclass(frozen=True, kw_only=True)
class RocmBuild(backends.KeyedBuild):
    """Everything the plan depends on; `plan()` is a pure function of it."""

    builder = backends.Builder("vllm-omni-rocm-builder", bootstrap=True)
    dockerfile = "docker/Dockerfile.rocm"
    arch: str

    @property
    def cache_ref(self) -> str:
        return f"{self.registry}:rocm-deps-cache-{self.key.key}"

    def spec(self) -> backends.BuildSpec:
        return self.build_spec(
            target="test",
            build_args=(("ARG_PYTORCH_ROCM_ARCH", self.arch),),
            pull=True,
            cache_to_options=("mode=max", "compression=zstd", "ignore-error=true"),
        )

    def plan(self) -> door.Plan:
        facts = (
            ("cache key", self.key.key),
            ("key inputs", ", ".join(self.key.inputs)),
            ("arch", self.arch),
            ("cache ref", self.cache_ref),
            ("image", self.image_ref),
            *self.backend_facts(),
        )
        return door.Plan(self.steps(), facts, title="ROCm CI image")


def prepare(options: BuildOptions, env: Mapping[str, str] | None = None) -> RocmBuild:
    """Resolve and check every input; all problems are reported at once, before any command."""
    source = os.environ if env is None else env
    arch, arch_from = setting(options.arch, "--arch", source, ARCH_ENV, DEFAULT_ARCH)
    return prepare_keyed(
        RocmBuild,
        options,
        source,
        registry_env=refs.ROCM_REGISTRY_ENV,
        default_registry=refs.ROCM_REGISTRY,
        key_of=lambda repo: cachekey.rocm_key(repo, arch),
        problems=filter(None, [arch_problem(arch, arch_from)]),
        arch=arch,
    )


def arch_problem(arch: str, source: str) -> str | None:
    """Why `arch` cannot be PYTORCH_ROCM_ARCH, or None.

    It is used verbatim (the key hashes its bytes, the build arg passes it),
    `;` lists included; whitespace and control characters would change both
    without anyone seeing it, so they are an input error.
    """
    bad = sorted({c for c in arch if c.isspace() or unicodedata.category(c).startswith("C")})
    if not bad:
        return None
    return (
        f"{source}: {arch!r} has whitespace or a control character "
        f"({', '.join(repr(c) for c in bad)}); give the "
        "targets without spaces, separated by ';' (e.g. gfx90a;gfx942)"
    )


def build(options: BuildOptions) -> None:
    job = prepare(options)
    if options.dry_run:
        door.execute(job.plan(), dry_run=True)
        return
    job.probe()
    print(f"ROCm dependency cache: {job.cache_ref}\nROCm CI image: {job.image_ref}", flush=True)
    job.execute()
