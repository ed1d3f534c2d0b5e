"""Ask the registry a ROCm/CUDA build talks to whether it answers, before the build.

A registry that accepts connections but never answers hung `build-image` and
dockerd's `--cache-from` lookup; one short `GET /v2/` makes it one line and exit 1
(the machine's state, so amd-build's retry may pass). `VLLM_OMNI_CI_REGISTRY_PROBE=0`
skips it. Asked: the image's registry when pushing; under `--no-push` the cache
ref's only when on this machine; `--dry-run` asks nothing. Any HTTP status or a
certificate failure is an answer; a timeout, refusal or unresolved name is not.
Docker's rules: a repository's first component is a registry host when it has a
`.` or `:` or is `localhost` (else Docker Hub); a loopback registry speaks HTTP.
"""

from __future__ import annotations

import os
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass

from ci import door, webclient
from ci.errors import Failure

TIMEOUT = 5.0
SKIP_ENV = "VLLM_OMNI_CI_REGISTRY_PROBE"
DOCKER_HUB = "registry-1.docker.io"
_HUB_NAMES = ("docker.io", "index.docker.io", "registry-1.docker.io")
LOOPBACK_HOSTS = ("localhost", "[::1]")


def on_this_machine(ref: str) -> bool:
    """The ref's registry is on this machine (loopback), so a request to it leaves nothing."""
    host = ref.split("/", 1)[0] if "/" in ref else ""
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0] + "]"
    return name in LOOPBACK_HOSTS or name.startswith("127.")


def host_of(repository: str) -> str:
    """The registry host of an image repository or ref, as docker reads it."""
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return DOCKER_HUB if first in _HUB_NAMES else first
    return DOCKER_HUB


@dataclass(frozen=True)
class Target:
    """A registry the build will talk to, and what for (for the messages)."""

    host: str
    why: str  # "pushes its image and cache there", "reads its cache there"

    @property
    def url(self) -> str:
        scheme = "http" if on_this_machine(f"{self.host}/x") else "https"
        return f"{scheme}://{self.host}/v2/"


def target(image_ref: str, cache_ref: str, push: bool) -> Target | None:
    """The registry a keyed build talks to (None: it talks to none)."""
    if push:
        return Target(host_of(image_ref), "pushes its image and cache there")
    if on_this_machine(cache_ref):
        return Target(host_of(cache_ref), "reads its cache there")
    return None


_NONE = "registry probe: none (--no-push, and the cache ref's registry is not on this machine"


def plan_note(found: Target | None) -> str:
    """The dry-run's `# note:` on the probe a run would make."""
    if found is None:
        return f"{_NONE})"
    return (
        f"registry probe: a run first asks {found.url} ({TIMEOUT:g}s) and stops if it does "
        "not answer; --dry-run opens no connection"
    )


def ask(url: str, timeout: float = TIMEOUT) -> tuple[bool, str]:
    """One GET (a redirect is an answer too): (answered, what it said, e.g. "HTTP 401")."""
    request = urllib.request.Request(url, headers={"User-Agent": "vllm-omni-ci registry probe"})
    try:
        with webclient.send(request, timeout=timeout) as response:
            return (True, f"HTTP {response.status}")
    except urllib.error.HTTPError as exc:
        return (True, f"HTTP {exc.code}")
    except (OSError, ValueError) as exc:  # URLError carries the cause as its reason
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, ssl.SSLCertVerificationError):
            return (True, f"TLS: {reason.verify_message or reason}")
        if isinstance(reason, TimeoutError):
            return (False, f"no answer within {timeout:g}s")
        if isinstance(reason, OSError) and reason.strerror:
            return (False, reason.strerror.lower())
        return (False, str(reason) or type(reason).__name__)


def check(found: Target | None, registry_from: str) -> None:
    """Say on stderr what the registry answered; raise (exit 1) when it did not."""
    if found is None:
        door.note(f"{_NONE}: the build asks no registry)")
        return
    if os.environ.get(SKIP_ENV) == "0":
        door.note(f"registry probe: skipped ({SKIP_ENV}=0); the build {found.why}: {found.host}")
        return
    answered, said = ask(found.url)
    if answered:
        door.note(f"registry {found.host} answers ({found.url}: {said}); the build {found.why}")
        return
    raise Failure(
        f"registry {found.host} does not answer ({found.url}: {said}); the build "
        f"{found.why}, and would hang or fail: start it (the sandbox's registry: "
        f"`vllm-omni-ci sandbox up`) or name another with {registry_from} "
        f"({SKIP_ENV}=0 skips this check)",
    )
