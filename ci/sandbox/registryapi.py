"""The two questions asked of the sandbox's registry over HTTP: does it answer, and what it holds.

Its own module because both `ci.doctor` (the machine report, which says
whether the base image is in the registry) and `ci.sandbox.parts` (the
registry and base-image parts) ask them, and they would otherwise import
each other. Each takes the registry (host:port) the sandbox recorded.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from ci import webclient
from ci.sandbox.settings import BASE_IMAGE_REPO, BASE_IMAGE_TAG

MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.index.v1+json",
    ]
)


def registry_answers(registry: str) -> bool:
    """Quiet: `sandbox up` polls it while the registry starts."""
    request = urllib.request.Request(f"http://{registry}/v2/")
    try:
        with webclient.send(request, timeout=2.0, quiet=True) as resp:
            return int(resp.status) in (200, 401)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def manifest_digest(registry: str, repository: str, tag: str) -> str | None:
    """The registry's digest of `repository:tag`, or None when it has no such tag."""
    request = urllib.request.Request(
        f"http://{registry}/v2/{repository}/manifests/{tag}",
        method="HEAD",
        headers={"Accept": MANIFEST_TYPES},
    )
    try:
        with webclient.send(request, timeout=10, quiet=True) as resp:
            return str(resp.headers["Docker-Content-Digest"]) if resp.status == 200 else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def in_registry(registry: str) -> bool:
    """Whether the sandbox's base image is in the registry."""
    return manifest_digest(registry, BASE_IMAGE_REPO, BASE_IMAGE_TAG) is not None
