"""Where the sandbox's engine listens and which port its registry takes: chosen by `up`.

`up --socket PATH --registry-port N` picks them; `up` records them in
state.json (layout.py), and `status`, `down` and `doctor` read them back from
there, so that every later command looks where `up` put things. Without a
record the engine's socket is the one a docker client reaches by default
($DOCKER_HOST's unix socket, else /var/run/docker.sock) and the port is 5000.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

# Where every docker client and the Docker SDK look when DOCKER_HOST is unset, so that
# no task, test or user shell needs DOCKER_HOST.
DEFAULT_SOCKET = "/var/run/docker.sock"
DEFAULT_REGISTRY_PORT = 5000
# The registry listens on loopback only: nothing off this machine reaches it.
REGISTRY_HOST = "127.0.0.1"
BASE_IMAGE_REPO = "omni-ci/python-base"
BASE_IMAGE_TAG = "bookworm"
UNIX = "unix://"
PORTS = range(1, 65536)
SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes on Linux, the last one a NUL


@dataclass(frozen=True)
class Settings:
    """The engine's socket (an absolute path) and the registry's TCP port on 127.0.0.1."""

    socket: str = DEFAULT_SOCKET
    registry_port: int = DEFAULT_REGISTRY_PORT

    @property
    def docker_host(self) -> str:
        """The engine as DOCKER_HOST names it."""
        return UNIX + self.socket

    @property
    def registry(self) -> str:
        """host:port, as image references name the registry."""
        return f"{REGISTRY_HOST}:{self.registry_port}"

    @property
    def base_image(self) -> str:
        return f"{self.registry}/{BASE_IMAGE_REPO}:{BASE_IMAGE_TAG}"

    @property
    def docker_env(self) -> dict[str, str]:
        """The environment of every docker client the sandbox runs: pointed at its engine."""
        return {"DOCKER_HOST": self.docker_host}


def client_host() -> str:
    """The engine a docker client reaches here without options: $DOCKER_HOST, else the default."""
    return os.environ.get("DOCKER_HOST") or UNIX + DEFAULT_SOCKET


def default_settings() -> Settings:
    """Before any `up` recorded its choice: the socket clients reach (when it is a unix one)."""
    path = client_host().removeprefix(UNIX)
    return Settings(path if client_host().startswith(UNIX + "/") else DEFAULT_SOCKET)


def port_problem(value: str) -> str:
    """Why `value` is no registry port ("" when it is one)."""
    if not (value.isascii() and value.isdigit()) or int(value) not in PORTS:
        return (
            f"{value!r} is not a port: allowed values are whole numbers {PORTS[0]} to {PORTS[-1]}"
        )
    return ""


def socket_problem(value: str) -> str:
    """Why `value` is no place for the engine's socket ("" when it is one).

    dockerd removes whatever is at its socket's path before it listens, so a path
    that holds anything but a socket is refused rather than handed to it.
    """
    path = Path(value)
    if not path.is_absolute():
        return f"{value!r} is not an absolute path"
    if len(os.fsencode(value)) > SOCKET_PATH_MAX:
        return f"{value!r} is longer than a unix socket's path may be ({SOCKET_PATH_MAX} bytes)"
    if not path.parent.exists():
        return f"{value!r}: its folder {path.parent} does not exist"
    if not path.parent.is_dir():
        return f"{value!r}: {path.parent} is not a folder"
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return ""
    except (OSError, ValueError) as exc:
        return f"{value!r}: cannot inspect it: {getattr(exc, 'strerror', None) or exc}"
    if not stat.S_ISSOCK(mode):
        return f"{value!r} exists and is not a socket (dockerd would remove it)"
    return ""


def parse(registry_port: str, socket: str, recorded: Settings) -> tuple[Settings, list[str]]:
    """`recorded` with the given options in place ("" leaves one as it is), and the problems.

    The socket is checked wherever it came from (the option, the record, DOCKER_HOST):
    `up` hands it to dockerd.
    """
    problems = []
    port_why = port_problem(registry_port) if registry_port else ""
    if port_why:
        problems.append(f"--registry-port: {port_why}")
    chosen = Settings(
        socket or recorded.socket,
        int(registry_port) if registry_port and not port_why else recorded.registry_port,
    )
    if why := socket_problem(chosen.socket):
        problems.append(
            f"--socket: {why}" if socket else f"engine socket {why} (choose one with --socket)"
        )
    return chosen, problems
