"""The exact Debian packages the sandbox installs, and why these.

Bookworm's engine (20.10) has neither buildx nor the containerd image store the
buildx `docker` driver needs to export a registry cache; trixie's engine, client,
buildx and containerd run on bookworm's libc unchanged, and the small helpers
come from bookworm. A pin is an upstream version (the Debian revision may move
with security updates); the revision installed is printed and kept in installed.json.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pin:
    package: str
    suite: str
    upstream: str

    def matches(self, debian_version: str) -> bool:
        """`26.1.5+dfsg1-9` matches upstream 26.1.5; `26.1.50-1` does not."""
        rest = debian_version.removeprefix(self.upstream)
        return rest != debian_version and (rest == "" or rest[0] in "+-~")


ENGINE = (
    Pin("docker.io", "trixie", "26.1.5"),
    Pin("docker-cli", "trixie", "26.1.5"),
    Pin("containerd", "trixie", "1.7.24"),
    Pin("runc", "bookworm", "1.1.5"),
    Pin("tini", "bookworm", "0.19.0"),
)
BUILDX = (Pin("docker-buildx", "trixie", "0.13.1"),)
REGISTRY = (Pin("docker-registry", "bookworm", "2.8.2"),)
DEBOOTSTRAP = (Pin("debootstrap", "bookworm", "1.0.128"),)
SUITES = ("trixie", "bookworm")
