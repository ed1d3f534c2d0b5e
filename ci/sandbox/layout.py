"""Where the sandbox keeps its files: one root, everything under it, nothing elsewhere.

The root is `$VLLM_OMNI_CI_SANDBOX`, else `$XDG_DATA_HOME/vllm-omni-ci/sandbox`
(`~/.local/share/...`). The only path outside it is the buildx plugin link in
the docker client's `cli-plugins` folder, which `up` records and `down --purge`
removes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT_ENV = "VLLM_OMNI_CI_SANDBOX"
# The engine listens where every docker client and the Docker SDK look by default,
# so that no task, test or user shell needs DOCKER_HOST.
SOCKET = "/var/run/docker.sock"
REGISTRY = "127.0.0.1:5000"
BASE_IMAGE_REPO = "omni-ci/python-base"
BASE_IMAGE_TAG = "bookworm"
BASE_IMAGE = f"{REGISTRY}/{BASE_IMAGE_REPO}:{BASE_IMAGE_TAG}"


def default_root(env: dict[str, str] | None = None) -> Path:
    source = os.environ if env is None else env
    if source.get(ROOT_ENV):
        return Path(source[ROOT_ENV]).expanduser()
    data = source.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "vllm-omni-ci" / "sandbox"


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def prefix(self) -> Path:
        """Where the pinned .debs are unpacked (`dpkg -x`): usr/bin, usr/sbin, usr/libexec."""
        return self.root / "prefix"

    @property
    def debs(self) -> Path:
        return self.root / "debs"

    @property
    def apt(self) -> Path:
        """The private apt state: sources list, package lists, cache."""
        return self.root / "apt"

    @property
    def run(self) -> Path:
        """Logs, pid files and the engine's exec root."""
        return self.root / "run"

    @property
    def docker_data(self) -> Path:
        return self.root / "docker"

    @property
    def registry_data(self) -> Path:
        return self.root / "registry"

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def installed(self) -> Path:
        return self.root / "installed.json"

    def bin(self, name: str) -> Path:
        for folder in ("usr/bin", "usr/sbin"):
            path = self.prefix / folder / name
            if path.exists():
                return path
        return self.prefix / "usr/bin" / name

    @property
    def buildx_plugin(self) -> Path:
        return self.prefix / "usr/libexec/docker/cli-plugins/docker-buildx"

    @property
    def path_env(self) -> str:
        """PATH with the prefix first: dockerd finds its containerd, runc and docker-init there."""
        ours = [str(self.prefix / "usr/bin"), str(self.prefix / "usr/sbin")]
        return os.pathsep.join([*ours, os.environ.get("PATH", os.defpath)])


def plugin_dir(env: dict[str, str] | None = None) -> Path:
    """The per-user `cli-plugins` folder every docker client reads ($DOCKER_CONFIG or ~/.docker)."""
    source = os.environ if env is None else env
    config = source.get("DOCKER_CONFIG") or str(Path.home() / ".docker")
    return Path(config).expanduser() / "cli-plugins"
