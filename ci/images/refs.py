"""Which image `build-image --platform P` gives a commit, and what an image reference may be.

A reference is `<repository>:<tag>`: the platform's repository (ROCm's moved by
ROCM_CI_IMAGE_REGISTRY, NPU's by IMAGE_REGISTRY and IMAGE_NAME), the commit as
tag (NPU: plus the variant's suffix). The builds, the XPU runner and the local
tiers all ask here, so a tier and the build that made its image cannot disagree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from ci.images import variants
from ci.platforms import Platform

ROCM_REGISTRY_ENV: Final = "ROCM_CI_IMAGE_REGISTRY"
ROCM_REGISTRY: Final = "rocm/vllm-omni"
CUDA_REGISTRY: Final = "public.ecr.aws/q9t5s3a7/vllm-ci-test-repo"
XPU_REPOSITORY: Final = "xpu/vllm-omni-ci"

# Docker's grammar: a host[:port], lowercase path components, a tag of at most 128.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
HOST = re.compile(rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?")
PATH = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def image_ref(repository: str, tag: str) -> str:
    return f"{repository}:{tag}"


def repository_problem(value: str, source: str) -> str | None:
    """Why `value` cannot be the repository part of an image ref, or None.

    As docker parses it: the first component is a registry host only if it has
    a '.' or ':' or is `localhost`; everything else is a lowercase path.
    """
    host, _, path = value.partition("/")
    if not (path and ("." in host or ":" in host or host == "localhost")):
        host, path = "", value
    if (not host or HOST.fullmatch(host)) and PATH.fullmatch(path) and len(value) <= 255:
        return None
    return (
        f"{source}: {value!r} is not a valid image repository "
        "(expected [host[:port]/]path, lowercase path components, no tag or digest)"
    )


def tag_problem(value: str, source: str) -> str | None:
    """Why `value` cannot be an image tag, or None."""
    if TAG.fullmatch(value):
        return None
    return (
        f"{source}: {value!r} is not a valid image tag "
        "(allowed: letters, digits, '_', '.', '-'; not starting with '.' or '-'; at most 128)"
    )


def reference_problem(value: str, source: str) -> str | None:
    """Why `value` cannot be an image reference `[host[:port]/]path[:tag]`, or None."""
    name, tag = value, None
    if value.rfind(":") > value.rfind("/"):
        name, _, tag = value.rpartition(":")
    if repository_problem(name, source) is None and (tag is None or TAG.fullmatch(tag)):
        return None
    return (
        f"{source}: {value!r} is not a valid image reference "
        "(expected [host[:port]/]path[:tag], lowercase path components)"
    )


def ci_image(platform: Platform, commit: str, environ: Mapping[str, str], preset: str = "") -> str:
    """The tag `build-image --platform <platform>` gives `commit` (NPU: the preset's variant)."""
    if platform is Platform.ROCM:
        return image_ref(environ.get(ROCM_REGISTRY_ENV) or ROCM_REGISTRY, commit)
    if platform is Platform.CUDA:
        return image_ref(CUDA_REGISTRY, commit)
    if platform is Platform.XPU:
        return image_ref(XPU_REPOSITORY, commit)
    row = next((v for v in variants.VARIANTS if preset in v.presets), None) or variants.variant("")
    registry = environ.get("IMAGE_REGISTRY") or variants.IMAGE_REGISTRY
    name = environ.get("IMAGE_NAME") or variants.IMAGE_NAME
    return image_ref(f"{registry}/{name}", row.image_tag(commit))
