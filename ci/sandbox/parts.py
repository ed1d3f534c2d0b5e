"""The five parts of the sandbox, each able to say whether it is there and to bring itself up.

A part is "there" only if it can do what the tasks need, checked by asking
it, never by the presence of a file: an engine must answer *and* have the
containerd image store, the `docker` on PATH must run `buildx`, the registry
must answer /v2/, the base image must be in the registry, and the builder
must be inspectable. `up` reuses a part that is there, starts one that is
installed but stopped, and installs one that is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from ci import door
from ci.errors import Failure
from ci.sandbox import debs
from ci.sandbox.layout import Layout, plugin_dir
from ci.sandbox.registryapi import in_registry, registry_answers

REUSED, STARTED, INSTALLED = "reused", "started", "installed"
UP = "vllm-omni-ci sandbox up"
# The containerd snapshotter is what lets the buildx `docker` driver export a registry cache.
CONTAINERD_STORE = "io.containerd.snapshotter.v1"
BOOTSTRAP_INCLUDE = "python3,python3-pip,python3-pytest,python3-yaml,git"


@dataclass(frozen=True)
class PartStatus:
    """One part as `status` shows it: ok, what was found, and the fix when it is missing."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


# One part as `up` left it: (reused, started or installed; how).
Outcome: TypeAlias = tuple[str, str]


def _log_tail(path: str) -> str:
    try:
        lines = Path(path).read_text(errors="replace").strip().splitlines()[-3:]
    except OSError:
        return f"no log at {path}"
    return f"log {path}: " + " | ".join(lines)


def _program(layout: Layout, name: str, wanted: tuple[debs.Pin, ...]) -> tuple[str, str]:
    """(the system's `name`, else the prefix's, unpacked first; what `debs.ensure` unpacked)."""
    found = shutil.which(name)
    if found:
        return found, ""
    # Unpack first: where the program lands (usr/bin or usr/sbin) is known only then.
    installed = debs.ensure(layout, wanted)
    return str(layout.bin(name)), installed


def _start(
    layout: Layout,
    part: str,
    cmd: door.Command,
    what: str,
    ready: Callable[[], bool],
    limit: float,
) -> door.Service:
    """Spawn a service, record it for `down` before waiting, and wait until it answers.

    Polled for at most `limit` seconds; a service that exits first fails at once.
    """
    service = door.spawn(cmd, str(layout.run / f"{cmd.argv[0].rsplit('/', 1)[-1]}.log"))
    layout.state.services[part] = service
    deadline = time.monotonic() + limit
    while not ready():
        if not door.alive(service):
            raise Failure(f"{what} exited before answering; {_log_tail(service.log)}")
        if time.monotonic() >= deadline:
            raise Failure(f"{what} did not answer within {limit:g}s; {_log_tail(service.log)}")
        time.sleep(0.5)
    return service


def _started(installed: str, started: str) -> Outcome:
    """`installed: X into PREFIX; started …` after an install, else `started: …`."""
    if installed:
        return INSTALLED, f"{installed}; started {started}"
    return STARTED, started


def engine_info(docker: str, env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], str]:
    """`docker info` as JSON once an engine answers (it names a ServerVersion), else ({}, why).

    `doctor` (the engine clients reach) and the engine part (the sandbox's, through `env`)
    read the engine this one way, so they agree.
    """
    if not Path(docker).exists() and not shutil.which(docker):
        return {}, "no docker client"
    info = door.capture([docker, "info", "--format", "{{json .}}"], timeout=30, env=env)
    try:
        data = json.loads(info.stdout) if info.stdout.strip() else {}
    except json.JSONDecodeError:
        data = {}
    data = data if isinstance(data, dict) else {}
    if data.get("ServerVersion"):
        return data, ""
    errors = data.get("ServerErrors")
    lines = info.stderr.strip().splitlines() or ["no answer"]
    return {}, "; ".join(errors) if errors else lines[-1]


def containerd_store(info: Mapping[str, Any]) -> bool:
    """Whether the engine keeps its images in containerd (`docker info`'s DriverStatus)."""
    return any(CONTAINERD_STORE in str(pair) for pair in info.get("DriverStatus") or [])


def check_engine(layout: Layout) -> PartStatus:
    host = layout.settings.docker_host
    info, error = engine_info(layout.docker(), layout.settings.docker_env)
    version = info.get("ServerVersion")
    if version and containerd_store(info):
        return PartStatus(
            "engine", True, f"Docker {version} at {host} with the containerd image store"
        )
    if version:
        return PartStatus(
            "engine",
            False,
            f"Docker {version} answers at {host} without the containerd image store",
            'set {"features": {"containerd-snapshotter": true}} in its daemon.json and restart'
            f" it, or stop it so that `{UP}` starts its own",
        )
    return PartStatus("engine", False, f"no engine answers at {host} ({error})", f"run `{UP}`")


def daemon_config(layout: Layout) -> dict[str, object]:
    """dockerd's settings: the containerd image store, and every path inside the sandbox."""
    return {
        "features": {"containerd-snapshotter": True},
        "data-root": str(layout.docker_data),
        "exec-root": str(layout.run / "docker"),
        "pidfile": str(layout.run / "dockerd.pid"),
        "hosts": [layout.settings.docker_host],
        # Without iptables on the host, dockerd must not try to program it (containers
        # still get a bridge; the builds and tests need no outbound network).
        "iptables": shutil.which("iptables") is not None,
        "ip6tables": False,
    }


def _drop_stale_pidfile(pidfile: Path) -> None:
    """A pid file left by a dockerd that was killed: dockerd refuses to start over a live pid.

    Kept only when its pid is a running dockerd (then the engine would have answered,
    and dockerd itself reports the clash); otherwise removed, and the removal said.
    """
    import psutil

    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        if psutil.Process(pid).name() == "dockerd":
            return
    except psutil.Error:
        pass
    pidfile.unlink(missing_ok=True)
    door.note(f"removed {pidfile}: pid {pid} is no running dockerd")


def up_engine(layout: Layout, check: PartStatus) -> Outcome:
    if engine_info(layout.docker(), layout.settings.docker_env)[0]:  # not ours, and unusable
        raise Failure(f"engine: {check.detail}: {check.fix}")
    if os.geteuid() != 0:
        raise Failure(f"engine: {check.detail}; starting dockerd needs root: sudo {UP}")
    installed = debs.ensure(layout, (*debs.ENGINE, *debs.BUILDX))
    _drop_stale_pidfile(layout.run / "dockerd.pid")
    config = layout.run / "daemon.json"
    config.write_text(json.dumps(daemon_config(layout), indent=2) + "\n")
    host = layout.settings.docker_host
    dockerd = door.Command(
        (str(layout.bin("dockerd")), "--config-file", str(config)),
        description=f"start dockerd on {host} (data in {layout.docker_data})",
        env={"PATH": layout.path_env},
    )
    service = _start(layout, "engine", dockerd, "dockerd", lambda: check_engine(layout).ok, 90)
    started = f"dockerd (pid {service.pid}): {check_engine(layout).detail}"
    return _started(installed, started)


def check_buildx(layout: Layout) -> PartStatus:
    if shutil.which("docker") is None:
        # The tasks run `docker` from PATH; the prefix's client is not on it.
        folder = layout.bin("docker").parent
        return PartStatus(
            "buildx",
            False,
            "no `docker` on PATH",
            f"put the sandbox's client on PATH: export PATH={folder}:$PATH, then `{UP}`",
        )
    docker = layout.docker()
    version = door.capture(
        [docker, "buildx", "version"], timeout=30, env=layout.settings.docker_env
    )
    if version.ok and version.stdout.strip():
        return PartStatus("buildx", True, f"{version.stdout.strip()} (with {docker})")
    return PartStatus(
        "buildx",
        False,
        f"`{docker} buildx` does not run",
        f"run `{UP}` (links the pinned plugin into {plugin_dir()})",
    )


def up_buildx(layout: Layout, check: PartStatus) -> Outcome:
    if shutil.which("docker") is None:
        raise Failure(f"buildx: {check.detail}: {check.fix}")
    installed = debs.ensure(layout, debs.BUILDX)
    link = plugin_dir() / "docker-buildx"
    if link.exists() or link.is_symlink():
        if not (link.is_symlink() and Path(link.readlink()) == layout.buildx_plugin):
            raise Failure(
                f"buildx: {link} is there but `docker buildx` does not run; remove it and run"
                f" `{UP}` again"
            )
    else:
        made = [p for p in (link.parent, *link.parent.parents) if not p.exists()]
        link.parent.mkdir(parents=True, exist_ok=True)
        # Recorded, so that `down --purge` removes the folders as well as the link.
        layout.state.folders += [
            str(p) for p in reversed(made) if str(p) not in layout.state.folders
        ]
        link.symlink_to(layout.buildx_plugin)
        door.note(f"linked {link} -> {layout.buildx_plugin}")
        if str(link) not in layout.state.links:
            layout.state.links.append(str(link))
    after = check_buildx(layout)
    if not after.ok:
        raise Failure(f"buildx: {after.detail} even with {link}")
    detail = f"{after.detail}; plugin linked at {link}"
    return INSTALLED, f"{installed}; {detail}" if installed else detail


def check_registry(layout: Layout) -> PartStatus:
    registry = layout.settings.registry
    if registry_answers(registry):
        return PartStatus("registry", True, f"http://{registry}/v2/ answers")
    return PartStatus("registry", False, f"nothing answers at http://{registry}/v2/", f"run `{UP}`")


def registry_config(layout: Layout) -> str:
    """The registry's settings: loopback only at the chosen port, no auth, deletes allowed
    (the tests delete what they push), its data inside the sandbox."""
    return (
        "version: 0.1\n"
        "log:\n  level: warn\n"
        "storage:\n"
        f"  filesystem:\n    rootdirectory: {layout.registry_data}\n"
        "  delete:\n    enabled: true\n"
        f"http:\n  addr: {layout.settings.registry}\n"
    )


def up_registry(layout: Layout, check: PartStatus) -> Outcome:
    program, installed = _program(layout, "docker-registry", debs.REGISTRY)
    registry = layout.settings.registry
    layout.registry_data.mkdir(parents=True, exist_ok=True)
    config = layout.run / "registry.yml"
    config.write_text(registry_config(layout))
    serve = door.Command(
        (program, "serve", str(config)),
        description=f"start the registry at {registry} (data in {layout.registry_data})",
    )
    what = f"the registry at {registry}"
    service = _start(layout, "registry", serve, what, lambda: registry_answers(registry), 30)
    started = f"{Path(program).name} (pid {service.pid}) at http://{registry}"
    return _started(installed, started)


def check_base_image(layout: Layout) -> PartStatus:
    image = layout.settings.base_image
    if in_registry(layout.settings.registry):
        return PartStatus("base image", True, f"{image} is in the registry")
    return PartStatus(
        "base image",
        False,
        f"{image} is not in the registry",
        f"run `{UP}` (pushes the local image, or builds it with debootstrap)",
    )


def debootstrap(layout: Layout, docker: str) -> str:
    """A bookworm minbase with Python, pip, pytest, PyYAML and git, imported as the base image."""
    program, installed = _program(layout, "debootstrap", debs.DEBOOTSTRAP)
    # The prefix's debootstrap finds its scripts only when told where they are.
    scripts = {"DEBOOTSTRAP_DIR": str(layout.prefix / "usr/share/debootstrap")}
    env = scripts if program.startswith(str(layout.prefix)) else {}
    installed += "; " if installed else ""
    rootfs, tarball = layout.root / "rootfs.tmp", layout.root / "rootfs.tar"
    shutil.rmtree(rootfs, ignore_errors=True)
    uri = debs.mirror()
    include = f"--include={BOOTSTRAP_INCLUDE}"
    try:
        debs.checked(
            door.Command(
                (program, "--variant=minbase", include, "bookworm", str(rootfs), uri),
                description=f"debootstrap bookworm from {uri}",
                env=env,
            ),
            "base image: debootstrap",
            layout.run / "debootstrap.log",
        )
        tar = ("tar", "-C", str(rootfs), "-cf", str(tarball), ".")
        debs.checked(door.Command(tar), "base image: tar of the root file system")
        image = layout.settings.base_image
        imported = door.Command(
            (docker, "import", str(tarball), image), env=layout.settings.docker_env
        )
        debs.checked(imported, "base image")
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
        tarball.unlink(missing_ok=True)
    return f"{installed}built with debootstrap from {uri}"


def up_base_image(layout: Layout, check: PartStatus) -> Outcome:
    docker, image, env = layout.docker(), layout.settings.base_image, layout.settings.docker_env
    local = door.capture([docker, "image", "inspect", image], env=env).ok
    if check.ok:
        if local:
            return REUSED, f"{image} (in the registry and local)"
        debs.checked(door.Command((docker, "pull", "-q", image), env=env), "base image")
        return INSTALLED, f"{image} pulled from the registry"
    how = "the local image pushed" if local else debootstrap(layout, docker)
    debs.checked(door.Command((docker, "push", "-q", image), env=env), "base image")
    return INSTALLED, f"{image}: {how}, pushed to {layout.settings.registry}"


def builder_name(docker: str = "docker", env: Mapping[str, str] | None = None) -> str:
    """The builder the e2e tests use: the `docker`-driver builder of the current context.

    The docker-container driver needs the moby/buildkit image, which cannot be
    pulled here; the engine's own BuildKit exports registry caches as well,
    given the containerd image store. Its builder is named after the context.
    """
    shown = door.capture([docker, "context", "show"], timeout=30, env=env)
    return shown.stdout.strip() if shown.ok and shown.stdout.strip() else "default"


def check_builder(layout: Layout, *, bootstrap: bool = False) -> PartStatus:
    """Whether the builder runs (`bootstrap`: once `buildx inspect --bootstrap` started it)."""
    docker = layout.docker()
    if not Path(docker).exists():
        return PartStatus("builder", False, "no docker client", f"run `{UP}`")
    name = builder_name(docker, layout.settings.docker_env)
    argv = [docker, "buildx", "inspect", "--builder", name] + (["--bootstrap"] if bootstrap else [])
    result = door.capture(argv, timeout=120, env=layout.settings.docker_env)
    fields: dict[str, str] = {}  # its first `Driver:` and `Status:` lines
    for key, sep, value in (line.partition(":") for line in result.stdout.splitlines()):
        if result.ok and sep and key.strip() in ("Driver", "Status"):
            fields.setdefault(key.strip(), value.strip())
    if fields.get("Status") == "running":
        return PartStatus("builder", True, f"{name} (driver {fields.get('Driver', '?')}, running)")
    found = f"status {fields['Status']}" if "Status" in fields else "not inspectable"
    return PartStatus("builder", False, f"{name}: {found}", f"run `{UP}`")


def up_builder(layout: Layout, check: PartStatus) -> Outcome:
    started = check_builder(layout, bootstrap=True)
    if not started.ok:
        raise Failure(f"builder: does not start: {started.detail}")
    return STARTED, started.detail


@dataclass(frozen=True)
class Part:
    """`up` reuses the part when its check is ok, unless `up` itself decides (`always_up`)."""

    name: str
    check: Callable[[Layout], PartStatus]
    up: Callable[[Layout, PartStatus], Outcome]
    service: bool = False  # a process `up` may start and `down` stops
    always_up: bool = False

    def bring_up(self, layout: Layout) -> Outcome:
        check = self.check(layout)
        if check.ok and not self.always_up:
            return REUSED, check.detail
        return self.up(layout, check)


PARTS = (
    Part("engine", check_engine, up_engine, service=True),
    Part("buildx", check_buildx, up_buildx),
    Part("registry", check_registry, up_registry, service=True),
    Part("base image", check_base_image, up_base_image, always_up=True),
    Part("builder", check_builder, up_builder),
)
