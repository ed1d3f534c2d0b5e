"""What `sandbox up` changes on this machine outside its own folder, and what `down` undoes.

One list, read three ways: `sandbox status --json` reports it with this
machine's paths and ports (`touches`), the README shows it with the defaults
(`markdown`), and tests/test_sandbox.py checks both against the places the
parts really use (the daemon's `hosts`, the registry's `addr`, the plugin link).
Everything else `up` writes is under the sandbox's root.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ci.sandbox.settings import Settings


@dataclass(frozen=True)
class Touch:
    """One change: the part that makes it, what and where it is, when `up` makes it, and
    what `down` does about it."""

    part: str
    what: str
    where: str
    up: str
    down: str


def touches(settings: Settings, root: str, link: str) -> list[Touch]:
    """The changes `up` makes with `settings`, its folder `root` and the buildx plugin
    link at `link`."""
    stopped = "stopped: SIGTERM, then SIGKILL after 30 s"
    return [
        Touch(
            "engine",
            "`dockerd`, run as root, with a shim per running container and its own"
            " `containerd` (or the system's, when `/run/containerd/containerd.sock` exists:"
            " then the images live in that one)",
            settings.socket,
            "started when no engine answers at the socket",
            f"{stopped} (images kept in a system `containerd` stay there)",
        ),
        Touch(
            "engine",
            "the engine's socket (group `docker` when that group exists)",
            settings.socket,
            "made by `dockerd` as it starts",
            "removed by `dockerd` as it stops, or by `down` when `dockerd` had to be killed",
        ),
        Touch(
            "engine",
            "mounts of `dockerd`'s network namespaces",
            f"{root}/run/docker",
            "made by `dockerd`",
            "those left are unmounted",
        ),
        Touch(
            "engine",
            "host networking: the `docker0` bridge, `net.ipv4.ip_forward=1`, and `dockerd`'s"
            " iptables chains when iptables is on PATH",
            "the host",
            "set up by `dockerd` as it starts",
            "left as they are (stopping any `dockerd` leaves them)",
        ),
        Touch(
            "buildx",
            "a symlink to the sandbox's buildx plugin",
            link,
            "made when `docker buildx` does not run",
            "`down --purge` removes it",
        ),
        Touch(
            "buildx",
            "the link's folder, with any missing parent",
            str(Path(link).parent),
            "made when missing",
            "`down --purge` removes those `up` made, when empty",
        ),
        Touch(
            "registry",
            "`docker-registry`, run as the user of `up`, on TCP (loopback only)",
            settings.registry,
            f"started when nothing answers at `http://{settings.registry}/v2/`",
            stopped,
        ),
    ]


def _cell(where: str) -> str:
    """A path or an address as code; words as they are."""
    return f"`{where}`" if where[:1] in ("/", "~", "$") or where[:1].isdigit() else where


def markdown(rows: list[Touch]) -> str:
    """The README's table of `rows`."""
    lines = ["| part | change | where | `up` | `down` |", "|---|---|---|---|---|"]
    lines += [f"| {t.part} | {t.what} | {_cell(t.where)} | {t.up} | {t.down} |" for t in rows]
    return "\n".join(lines) + "\n"


def readme_table() -> str:
    """The table as the README shows it: default settings, paths as a user writes them."""
    link = "~/.docker/cli-plugins/docker-buildx"
    return markdown(touches(Settings(), "$VLLM_OMNI_CI_SANDBOX", link))
