"""Pinned Debian packages into the sandbox's prefix, without touching the system's packages.

`apt-get download` from a private sources list naming the mirror apt already
uses, with its own lists, cache and empty dpkg status, then `dpkg -x` into the
prefix: nothing configured, no maintainer script, removing the prefix undoes it.

Why these pins: bookworm's engine (20.10) has neither buildx nor the containerd
image store the buildx `docker` driver needs to export a registry cache; trixie's
engine, client, buildx and containerd run on bookworm's libc unchanged, and the
small helpers come from bookworm. A pin is an upstream version (the Debian
revision may move with security updates); the revision installed is printed and
kept in installed.json.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ci import door
from ci.errors import Failure
from ci.sandbox.layout import Layout


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

DEFAULT_MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
SOURCES = (Path("/etc/apt/sources.list.d"), Path("/etc/apt/sources.list"))


def mirror(sources: Iterable[Path] = SOURCES) -> str:
    """The Debian mirror apt uses here: the first non-security URI of its sources."""
    files: list[Path] = []
    for source in sources:
        if source.is_dir():
            files += sorted(source.glob("*.sources")) + sorted(source.glob("*.list"))
        elif source.is_file():
            files.append(source)
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for found in re.findall(r"(?m)^\s*(?:URIs:\s*|deb\s+(?:\[[^]]*\]\s+)?)(\S+)", text):
            if found.startswith(("http://", "https://")) and "security" not in found:
                return str(found).rstrip("/")
    return DEFAULT_MIRROR


def sources_list(mirror_uri: str) -> str:
    return "".join(f"deb [signed-by={KEYRING}] {mirror_uri} {suite} main\n" for suite in SUITES)


def apt_options(layout: Layout) -> tuple[str, ...]:
    apt = layout.apt
    options = {
        "Dir::Etc::SourceList": str(apt / "sources.list"),
        "Dir::Etc::SourceParts": "/dev/null",
        "Dir::State::Lists": str(apt / "lists"),
        "Dir::Cache": str(apt / "cache"),
        "Dir::State::status": "/dev/null",
        "Debug::NoLocking": "1",
        "APT::Sandbox::User": "root",
    }
    return tuple(word for k, v in options.items() for word in ("-o", f"{k}={v}"))


def checked(cmd: door.Command, what: str, log: Path | None = None) -> str:
    """Run `cmd` quietly (its output into `log` when given); its stdout, or a Failure."""
    result = door.run(cmd, output="capture")
    if log is not None:
        log.write_text(result.stdout + result.stderr)
    if not result.ok:
        tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        where = f" (log {log})" if log else ""
        raise Failure(f"{what}: {cmd.line()} failed with exit {result.code}{where}: {tail}")
    return result.stdout


_UPDATED: set[Path] = set()  # package lists fetched by this process: once is enough


def update(layout: Layout) -> None:
    """Write the private sources list and fetch its package lists."""
    if layout.apt in _UPDATED:
        return
    uri = mirror()
    for folder in (layout.apt / "lists" / "partial", layout.apt / "cache" / "archives" / "partial"):
        folder.mkdir(parents=True, exist_ok=True)
    (layout.apt / "sources.list").write_text(sources_list(uri))
    checked(
        door.Command(
            ("apt-get", *apt_options(layout), "update"),
            description=f"package lists of trixie and bookworm from {uri} (private apt state)",
        ),
        "apt-get update",
    )
    _UPDATED.add(layout.apt)


def candidate(layout: Layout, pin: Pin) -> str:
    """The mirror's version of `pin.package` in `pin.suite` that matches the pin."""
    out = checked(
        door.Command(("apt-cache", *apt_options(layout), "madison", pin.package)),
        f"apt-cache madison {pin.package}",
    )
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 3 and f" {pin.suite}/" in f" {cells[2]}" and pin.matches(cells[1]):
            return cells[1]
    offered = ", ".join(c.split("|")[1].strip() for c in out.splitlines() if "|" in c) or "none"
    raise Failure(
        f"{pin.package}: the mirror has no {pin.upstream} in {pin.suite} (offered: {offered})"
    )


def install(layout: Layout, pins: Iterable[Pin]) -> list[tuple[str, str]]:
    """Download and unpack each pin into the prefix; return (package, version) installed."""
    update(layout)
    layout.debs.mkdir(parents=True, exist_ok=True)
    layout.prefix.mkdir(parents=True, exist_ok=True)
    versions = [(pin.package, candidate(layout, pin)) for pin in pins]
    checked(
        door.Command(
            ("apt-get", *apt_options(layout), "download", *(f"{p}={v}" for p, v in versions)),
            description="download " + ", ".join(f"{p} {v}" for p, v in versions),
            cwd=str(layout.debs),
        ),
        "apt-get download",
    )
    for package, version in versions:
        deb = next(layout.debs.glob(f"{package}_{version.replace(':', '%3a')}_*.deb"), None)
        if deb is None:
            raise Failure(f"{package}: apt-get download left no .deb in {layout.debs}")
        checked(
            door.Command(
                ("dpkg", "-x", str(deb), str(layout.prefix)),
                description=f"unpack {deb.name} into {layout.prefix}",
            ),
            "dpkg -x",
        )
    data = {**installed(layout), **dict(versions)}
    layout.installed.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return versions


def installed(layout: Layout) -> dict[str, str]:
    """package -> version of what this sandbox unpacked so far."""
    try:
        data = json.loads(layout.installed.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def ensure(layout: Layout, pins: Iterable[Pin]) -> str:
    """Unpack the pins not yet here at their version: "" when none was missing, else what."""
    have = installed(layout)
    todo = [p for p in pins if not (p.package in have and p.matches(have[p.package]))]
    if not todo:
        return ""
    return ", ".join(f"{p} {v}" for p, v in install(layout, todo)) + f" into {layout.prefix}"
