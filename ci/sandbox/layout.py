"""Where the sandbox keeps its files: one root, everything under it, nothing elsewhere.

The root is `$VLLM_OMNI_CI_SANDBOX`, else `$XDG_DATA_HOME/vllm-omni-ci/sandbox`
(`~/.local/share/...`). The only path outside it is the buildx plugin link in
the docker client's `cli-plugins` folder, which `up` records and `down --purge`
removes.
"""

from __future__ import annotations

import os
from pathlib import Path

# The engine listens where every docker client and the Docker SDK look by default,
# so that no task, test or user shell needs DOCKER_HOST.
SOCKET = "/var/run/docker.sock"
REGISTRY = "127.0.0.1:5000"
BASE_IMAGE_REPO = "omni-ci/python-base"
BASE_IMAGE_TAG = "bookworm"
BASE_IMAGE = f"{REGISTRY}/{BASE_IMAGE_REPO}:{BASE_IMAGE_TAG}"


def default_root() -> Path:
    if os.environ.get("VLLM_OMNI_CI_SANDBOX"):
        return Path(os.environ["VLLM_OMNI_CI_SANDBOX"]).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "vllm-omni-ci" / "sandbox"


class Layout:
    """Every path of one sandbox."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.prefix = root / "prefix"  # the pinned .debs, `dpkg -x`ed: usr/bin, usr/sbin, ...
        self.debs = root / "debs"
        self.apt = root / "apt"  # the private apt state: sources list, package lists, cache
        self.run = root / "run"  # logs, pid files and the engine's exec root
        self.docker_data = root / "docker"
        self.registry_data = root / "registry"
        self.state = root / "state.json"
        self.installed = root / "installed.json"
        self.buildx_plugin = self.prefix / "usr/libexec/docker/cli-plugins/docker-buildx"

    def bin(self, name: str) -> Path:
        """The prefix's program: usr/bin, else usr/sbin (usr/bin when it is in neither)."""
        where = [self.prefix / "usr/bin" / name, self.prefix / "usr/sbin" / name]
        return next((path for path in where if path.exists()), where[0])

    @property
    def path_env(self) -> str:
        """PATH with the prefix first: dockerd finds its containerd, runc and docker-init there."""
        ours = [str(self.prefix / "usr/bin"), str(self.prefix / "usr/sbin")]
        return os.pathsep.join([*ours, os.environ.get("PATH", os.defpath)])


def plugin_dir() -> Path:
    """The per-user `cli-plugins` folder every docker client reads ($DOCKER_CONFIG or ~/.docker)."""
    config = os.environ.get("DOCKER_CONFIG") or str(Path.home() / ".docker")
    return Path(config).expanduser() / "cli-plugins"
