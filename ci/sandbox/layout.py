"""Where the sandbox keeps its files: one root, everything under it, nothing elsewhere.

The root is `$VLLM_OMNI_CI_SANDBOX`, else `$XDG_DATA_HOME/vllm-omni-ci/sandbox`
(`~/.local/share/...`). What `up` touches outside it is listed in touches.py.
`state.json` records what `up` chose (settings.py), started, linked and made, so
that `status` looks where `up` put things and `down` undoes exactly that and
nothing else: a service by pid *and* start time (door.Service), so a pid reused
by another program is never signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ci import door
from ci.sandbox.settings import Settings, default_settings, port_problem


def default_root() -> Path:
    if os.environ.get("VLLM_OMNI_CI_SANDBOX"):
        return Path(os.path.expanduser(os.environ["VLLM_OMNI_CI_SANDBOX"]))
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "vllm-omni-ci" / "sandbox"


@dataclass
class State:
    services: dict[str, door.Service] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)  # made by `up` outside the root
    settings: Settings | None = None  # what `up` chose; None before any `up`


class Layout:
    """Every path of one sandbox, and what `up` recorded in it (`state`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.prefix = root / "prefix"  # the pinned .debs, `dpkg -x`ed: usr/bin, usr/sbin, ...
        self.debs = root / "debs"
        self.apt = root / "apt"  # the private apt state: sources list, package lists, cache
        self.run = root / "run"  # logs, pid files and the engine's exec root
        self.docker_data = root / "docker"
        self.registry_data = root / "registry"
        self.state_file = root / "state.json"
        self.installed = root / "installed.json"
        self.buildx_plugin = self.prefix / "usr/libexec/docker/cli-plugins/docker-buildx"
        self.state = self.load_state()

    def bin(self, name: str) -> Path:
        """The prefix's program: usr/bin, else usr/sbin (usr/bin when it is in neither)."""
        where = [self.prefix / "usr/bin" / name, self.prefix / "usr/sbin" / name]
        return next((path for path in where if path.exists()), where[0])

    def load_state(self) -> State:
        try:
            data = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict):
            return State()
        services: dict[str, door.Service] = {}
        for name, raw in (data.get("services") or {}).items():
            with contextlib.suppress(KeyError, TypeError, ValueError):  # a bad record is no service
                argv, pid, started = tuple(map(str, raw["argv"])), int(raw["pid"]), raw["started"]
                services[str(name)] = door.Service(pid, float(started), argv, str(raw["log"]))
        links, folders = ([str(p) for p in data.get(key) or []] for key in ("links", "folders"))
        return State(services, links, folders, _settings(data.get("settings")))

    @property
    def settings(self) -> Settings:
        """What `up` recorded, else the defaults."""
        return self.state.settings or default_settings()

    def save_state(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self.state), indent=2, sort_keys=True) + "\n")
        tmp.replace(self.state_file)

    def docker(self) -> str:
        """The client the sandbox drives: `docker` on PATH, else the prefix's."""
        return shutil.which("docker") or str(self.bin("docker"))

    @property
    def path_env(self) -> str:
        """PATH with the prefix first: dockerd finds its containerd, runc and docker-init there."""
        ours = [str(self.prefix / "usr/bin"), str(self.prefix / "usr/sbin")]
        return os.pathsep.join([*ours, os.environ.get("PATH", os.defpath)])


def recorded_settings() -> Settings:
    """What `up` recorded in the default sandbox, else the defaults: where `doctor` looks.

    Never raises: a home that cannot be found is no record.
    """
    try:
        return Layout(default_root()).settings
    except RuntimeError:  # Path.home() without HOME or a passwd entry
        return default_settings()


def _settings(raw: object) -> Settings | None:
    """A recorded choice, or None when there is none or it is not one (edited by hand)."""
    if not isinstance(raw, dict):
        return None
    socket, port = str(raw.get("socket", "")), str(raw.get("registry_port", ""))
    if port_problem(port) or not Path(socket).is_absolute():
        return None
    return Settings(socket, int(port))


def plugin_dir() -> Path:
    """The per-user `cli-plugins` folder every docker client reads ($DOCKER_CONFIG or ~/.docker)."""
    config = os.environ.get("DOCKER_CONFIG") or str(Path.home() / ".docker")
    return Path(os.path.expanduser(config)) / "cli-plugins"
