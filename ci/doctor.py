"""What this machine can do, so that tasks pick backends from facts, not guesses.

Several docker clients can sit on PATH, only some can run a BuildKit build
without the buildx plugin, and the engine may not support `--output
type=image`. Image builds call `probe()` and choose from the report.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ci import door
from ci.devices import Device, Inventory
from ci.devices import probe as probe_devices
from ci.errors import FAILURE, Stop, UserError
from ci.sandbox.layout import recorded_settings
from ci.sandbox.parts import UP, engine_info
from ci.sandbox.registryapi import in_registry, registry_answers
from ci.sandbox.settings import Settings

DEBIAN_DOCKER = "/usr/bin/docker"
PROBE_LABEL = "vllm-omni-ci.probe=1"
DOCKER_ENV = "VLLM_OMNI_CI_DOCKER"


@dataclass(frozen=True)
class Client:
    path: str
    version: str | None
    buildkit_without_buildx: bool
    buildx: bool


@dataclass(frozen=True)
class Report:
    clients: tuple[Client, ...] = ()
    chosen: str | None = None
    engine_version: str | None = None
    storage_driver: str | None = None
    engine_error: str | None = None
    output_image: bool = False
    buildctl: str | None = None
    registry: bool = False
    # The sandbox's socket and registry port, as `sandbox up` recorded them (else the defaults):
    # the registry probed is the one `up` started.
    sandbox: Settings = field(default_factory=Settings)
    shellcheck: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    devices: tuple[Device, ...] = ()  # the accelerators (`ci.devices`), probed by `doctor` only

    @property
    def engine(self) -> bool:
        return self.engine_version is not None

    def client(self) -> Client | None:
        """The chosen client's probe."""
        return next((c for c in self.clients if c.path == self.chosen), None)

    @property
    def buildx(self) -> bool:
        chosen = self.client()
        return bool(chosen and chosen.buildx)

    def buildkit_client(self) -> str | None:
        """A client that can run `DOCKER_BUILDKIT=1 docker build` without buildx."""
        chosen = self.client()
        if chosen and chosen.buildkit_without_buildx:
            return chosen.path
        return next((c.path for c in self.clients if c.buildkit_without_buildx), None)


def docker_clients() -> list[str]:
    """Every `docker` on PATH, in PATH order, plus the Debian one; no duplicates."""
    found: dict[Path, str] = {}  # the real file -> its first name
    entries = os.environ.get("PATH", "").split(os.pathsep)
    for candidate in (Path(entry or ".") / "docker" for entry in entries):
        # os.path's test: False, not an OSError, for a PATH entry the system refuses.
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            found.setdefault(candidate.resolve(), str(candidate))
    if Path(DEBIAN_DOCKER).is_file():
        found.setdefault(Path(DEBIAN_DOCKER).resolve(), DEBIAN_DOCKER)
    return list(found.values())


def probe_client(path: str) -> Client:
    version = door.capture([path, "version", "--format", "{{.Client.Version}}"])
    text = version.stdout.strip() or door.capture([path, "--version"]).stdout.strip() or None
    bk = door.capture([path, "build", "--help"], env={"DOCKER_BUILDKIT": "1"})
    bx = door.capture([path, "buildx", "version"])
    return Client(path=path, version=text, buildkit_without_buildx=bk.ok, buildx=bx.ok)


def named_docker(explicit: str | None = None) -> str | None:
    """The client the user named (`--docker`, then $VLLM_OMNI_CI_DOCKER), checked before
    anything is probed (a typo stops the task without running a client); else None."""
    wanted = explicit or os.environ.get(DOCKER_ENV)
    if not wanted:
        return None
    # os.path's test: False, not an OSError, for a name the system refuses (too long).
    resolved = shutil.which(wanted) or (
        wanted if os.path.isfile(wanted) and os.access(wanted, os.X_OK) else None
    )
    if resolved is None:
        source = "--docker" if explicit else DOCKER_ENV
        raise UserError(f"{source}: {wanted} is not an executable docker client")
    return resolved


def pick_docker(clients: list[Client], explicit: str | None = None) -> str | None:
    """`--docker`, then $VLLM_OMNI_CI_DOCKER, then the first client that can build with BuildKit."""
    able = (c.path for c in clients if c.buildx or c.buildkit_without_buildx)
    return named_docker(explicit) or next(able, clients[0].path if clients else None)


def _output_image(docker: str) -> bool:
    """Try a no-pull BuildKit build with `--output type=image`; remove what it made."""
    name = "vllm-omni-ci-probe:output-image"
    result = door.run(
        door.Command(
            (docker, "build", "--label", PROBE_LABEL, "--output", f"type=image,name={name}", "-"),
            env={"DOCKER_BUILDKIT": "1"},
            stdin="FROM scratch\nLABEL vllm-omni-ci.probe=1\n",
            timeout=60,
        ),
        output="capture",
        quiet=True,
    )
    if result.ok:
        door.capture([docker, "rmi", "-f", name])
    return result.ok


def _shellcheck() -> str | None:
    if not shutil.which("shellcheck"):
        return None
    out = door.capture(["shellcheck", "--version"]).stdout
    return next(
        (ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("version:")), None
    )


def probe(docker: str | None = None, *, engine: bool = True) -> Report:
    """Probe clients, engine, registry and tools. `engine=False` skips engine round-trips."""
    named_docker(docker)  # a bad name stops here, before any client runs
    clients = [probe_client(p) for p in docker_clients()]
    chosen = pick_docker(clients, docker)
    if chosen and chosen not in [c.path for c in clients]:
        clients.append(probe_client(chosen))
    info, error = engine_info(chosen) if chosen and engine else ({}, "")
    sandbox = recorded_settings()
    version = info.get("ServerVersion")
    report = Report(
        clients=tuple(clients),
        chosen=chosen,
        engine_version=version,
        storage_driver=info.get("Driver"),
        engine_error=(error or None) if chosen else "no docker client on PATH",
        buildctl=shutil.which("buildctl"),
        registry=registry_answers(sandbox.registry),
        sandbox=sandbox,
        shellcheck=_shellcheck(),
    )
    builder = report.buildkit_client()
    return replace(report, output_image=bool(version and builder and _output_image(builder)))


@dataclass(frozen=True)
class DoctorFinding:
    """One judged need of the tasks here: ok, or what is wrong and the one fix for it."""

    name: str
    ok: bool
    problem: str = ""
    fix: str = ""


def judge(report: Report, base_image: bool, builder: str = "auto") -> list[DoctorFinding]:
    """What the tasks need on this machine, each checked against the report.
    `builder="buildx"` needs a working `docker buildx`; `auto` and `engine` need a
    client that can build with BuildKit at all (buildx, or `DOCKER_BUILDKIT=1`)."""
    up = f"run `{UP}`"
    if builder == "buildx":
        why = f"`docker buildx` does not work with {report.chosen or 'any client'}"
        fix = f"{up} (links the pinned buildx plugin), or use --builder engine"
        build = DoctorFinding("buildx", report.buildx, why, fix)
    else:
        able = report.buildx or report.buildkit_client() is not None
        how = "neither buildx nor DOCKER_BUILDKIT=1 docker build"
        why = f"no docker client can build with BuildKit ({how})"
        build = DoctorFinding("buildkit", able, why, up)
    no_engine = f"no engine answers ({report.engine_error})"
    sandbox = report.sandbox
    return [
        DoctorFinding("engine", report.engine, no_engine, f"{up}, or start dockerd"),
        DoctorFinding(
            "registry", report.registry, f"nothing answers at http://{sandbox.registry}/v2/", up
        ),
        DoctorFinding("base image", base_image, f"{sandbox.base_image} is not in the registry", up),
        build,
    ]


def doctor(docker: str | None, *, as_json: bool, builder: str) -> None:
    """Print the report (with the judged checks under `checks` as JSON); then one
    `error:` line with its fix per failed check, and exit 1."""
    report = replace(probe(docker), devices=probe_devices().devices)
    findings = judge(report, report.registry and in_registry(report.sandbox.registry), builder)
    if as_json:
        data = asdict(report)
        data["checks"] = [asdict(f) for f in findings]
        data["ok"] = all(f.ok for f in findings)
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render(report))
    sys.stdout.flush()
    failed = [f"error: {f.name}: {f.problem}; fix: {f.fix}\n" for f in findings if not f.ok]
    if failed:
        sys.stderr.write("".join(failed))
        raise Stop(FAILURE)


def render(report: Report) -> str:
    yes = {True: "yes", False: "no"}
    lines = ["docker clients:"]
    for c in report.clients:
        mark = "*" if c.path == report.chosen else " "
        lines.append(
            f" {mark} {c.path}  version={c.version or '?'}  "
            f"buildkit-without-buildx={yes[c.buildkit_without_buildx]}  buildx={yes[c.buildx]}"
        )
    if not report.clients:
        lines.append("   (none)")
    engine = (
        f"{report.engine_version} (storage driver {report.storage_driver})"
        if report.engine
        else f"not reachable: {report.engine_error}"
    )
    lines += [
        f"engine: {engine}",
        f"engine supports --output type=image: {yes[report.output_image]}",
        f"docker buildx works: {yes[report.buildx]}",
        f"buildctl: {report.buildctl or 'not found'}",
        f"registry {report.sandbox.registry}: {'answers' if report.registry else 'no answer'}",
        f"shellcheck: {report.shellcheck or 'not found'}",
    ]
    inventory = Inventory(report.devices)
    platforms = dict.fromkeys(d.platform for d in report.devices)
    lines += [f"devices: {p}: {inventory.summary(p, memory=True)}" for p in platforms]
    lines += [] if platforms else ["devices: none found (nvidia-smi, rocm-smi, npu-smi, xpu-smi)"]
    return "\n".join(lines) + "\n"
