"""Which image `build-image --platform P` gives a commit: one place for every platform.

An image reference is `<repository>:<tag>`. The repository is per platform
(ROCm's may be moved by ROCM_CI_IMAGE_REGISTRY, NPU's by IMAGE_REGISTRY and
IMAGE_NAME); the tag is the commit, with the NPU variant's suffix for NPU.
The build modules, the XPU runner and the local tiers all ask here, so the
tier that runs an image and the build that made it cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ci.images import variants
from ci.platforms import Platform

ROCM_REGISTRY_ENV: Final = "ROCM_CI_IMAGE_REGISTRY"
ROCM_REGISTRY: Final = "rocm/vllm-omni"
CUDA_REGISTRY: Final = "public.ecr.aws/q9t5s3a7/vllm-ci-test-repo"
XPU_REPOSITORY: Final = "xpu/vllm-omni-ci"


def image_ref(repository: str, tag: str) -> str:
    return f"{repository}:{tag}"


def ci_image(platform: Platform, commit: str, environ: Mapping[str, str], preset: str = "") -> str:
    """The tag `build-image --platform <platform>` gives `commit` (NPU: the preset's variant)."""
    if platform is Platform.ROCM:
        return image_ref(environ.get(ROCM_REGISTRY_ENV) or ROCM_REGISTRY, commit)
    if platform is Platform.CUDA:
        return image_ref(CUDA_REGISTRY, commit)
    if platform is Platform.XPU:
        return image_ref(XPU_REPOSITORY, commit)
    row = next((v for v in variants.VARIANTS if preset in v.presets), None)
    row = row or variants.variant(variants.DEFAULT_VARIANT)
    registry = environ.get("IMAGE_REGISTRY") or variants.IMAGE_REGISTRY
    name = environ.get("IMAGE_NAME") or variants.IMAGE_NAME
    return row.image(commit, registry, name)
