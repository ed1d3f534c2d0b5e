"""`sandbox up`, `status` and `down`: the parts in order, one line each, on stdout.

stdout carries the result (one line per part, then the total); the commands
that `up` runs are echoed on stderr like every other task's. `up` takes the
engine's socket and the registry's port (settings.py) and records them;
`status` and `down` use what it recorded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

from ci import door
from ci.errors import FAILURE, Stop, UserError
from ci.sandbox import settings as chosen
from ci.sandbox.layout import Layout, default_root, plugin_dir
from ci.sandbox.parts import PARTS
from ci.sandbox.touches import Touch, touches

ACTIONS = ("up", "status", "down")
UP_ONLY = ("--registry-port", "--socket")


def _say(line: str) -> None:
    print(line, flush=True)


def _layout(root: str) -> Layout:
    # os.path's expansion: an unknown `~user` stays as written, as in a shell (pathlib raises).
    return Layout(Path(os.path.expanduser(root)) if root else default_root())


def sandbox(
    action: str,
    *,
    root: str = "",
    as_json: bool = False,
    purge: bool = False,
    registry_port: str = "",
    socket: str = "",
) -> None:
    """The task: every option checked (all problems in one round), then the action."""
    problems = []
    if action not in ACTIONS:
        problems.append(
            f"action: unknown value {action!r}: allowed values are {', '.join(ACTIONS)}"
        )
    if as_json and action != "status":
        problems.append("--json: applies to `sandbox status` only")
    if purge and action != "down":
        problems.append("--purge: applies to `sandbox down` only")
    for flag, value in zip(UP_ONLY, (registry_port, socket), strict=True):
        if value and action != "up":
            problems.append(
                f"{flag}: applies to `sandbox up` only (status and down use what up recorded)"
            )
    UserError.collect(problems)
    if action == "up":
        up(root, registry_port=registry_port, socket=socket)
    elif action == "status":
        status(root, as_json=as_json)
    else:
        down(root, purge=purge)


def choose(layout: Layout, registry_port: str = "", socket: str = "") -> chosen.Settings:
    """The settings of this `up`: the options, else what an earlier `up` recorded, else the
    defaults. A change that would leave a service of an earlier `up` running where `down`
    no longer looks is refused: that one must be stopped first."""
    settings, problems = chosen.parse(registry_port, socket, layout.settings)
    before = layout.state.settings
    if before is not None:
        moved = {
            "engine": ("--socket", before.socket != settings.socket, before.docker_host),
            "registry": (
                "--registry-port",
                before.registry_port != settings.registry_port,
                before.registry,
            ),
        }
        for part, (flag, changed, where) in moved.items():
            service = layout.state.services.get(part)
            if changed and service and door.alive(service):
                problems.append(
                    f"{flag}: the {part} `sandbox up` started (pid {service.pid}) still runs at"
                    f" {where}: run `vllm-omni-ci sandbox down` first"
                )
    UserError.collect(problems)
    return settings


def up(root: str = "", *, registry_port: str = "", socket: str = "") -> None:
    """Bring up every part in order; a part that fails stops `up` (exit 1) with its reason."""
    layout = _layout(root)
    settings = choose(layout, registry_port, socket)
    try:
        layout.run.mkdir(parents=True, exist_ok=True)  # the parts' logs and configs
    except OSError as exc:  # HOME a file, a read-only --root: before anything is started
        raise UserError(
            f"sandbox folder {layout.root}: cannot create it: {exc.strerror or exc}"
            " (choose another with --root or VLLM_OMNI_CI_SANDBOX)"
        ) from None
    layout.state.settings = settings  # recorded with the first part, whatever happens
    began = time.monotonic()
    _say(f"sandbox: {layout.root} ({where(settings)})")
    for part in PARTS:
        try:  # a part that cannot come up raises `Failure` (exit 1) with its reason
            verb, detail = part.bring_up(layout)
        finally:
            layout.save_state()
        _say(f"{part.name}: {verb}: {detail}")
    _say(f"sandbox up: {len(PARTS)} parts ready in {time.monotonic() - began:.1f}s")
    if settings.docker_host != chosen.client_host():
        door.note(
            f"docker clients here reach {chosen.client_host()}; point them at the sandbox's"
            f" engine with: export DOCKER_HOST={settings.docker_host}"
        )


def status(root: str = "", *, as_json: bool = False) -> None:
    """Each part ok or missing, with its fix; exit 1 when one is missing."""
    layout = _layout(root)
    found = [part.check(layout) for part in PARTS]
    ok, root_text = all(c.ok for c in found), str(layout.root)
    if as_json:
        settings = dataclasses.asdict(layout.settings)
        report = {
            "root": root_text,
            "ok": ok,
            "parts": [dataclasses.asdict(c) for c in found],
            "settings": {**settings, "recorded": layout.state.settings is not None},
            "touches": [dataclasses.asdict(t) for t in machine_touches(layout)],
        }
        _say(json.dumps(report, indent=2))
    else:
        _say(f"sandbox: {root_text} ({where(layout.settings)})")
        for c in found:
            fix = f" (fix: {c.fix})" if c.fix and not c.ok else ""
            _say(f"{c.name}: {'ok' if c.ok else 'missing'}: {c.detail}{fix}")
    if not ok:
        raise Stop(FAILURE)


def down(root: str = "", *, purge: bool = False) -> None:
    """Stop what `up` started, newest first; keep images and registry data.

    `--purge` also removes the plugin link `up` made and the unpacked packages
    (the prefix), so the machine is as before `up` but for the data folders.
    """
    layout = _layout(root)
    socket = Path(layout.settings.socket)
    stopped_engine = killed_engine = False
    for name in reversed([p.name for p in PARTS if p.service]):
        service = layout.state.services.pop(name, None)
        if service is None:
            _say(f"{name}: not started by sandbox up: left as it is")
            continue
        if not door.alive(service):
            _say(f"{name}: already stopped (pid {service.pid})")
            continue
        door.note(f"stopping {name} (pid {service.pid}): {' '.join(service.argv)}")
        killed = door.stop(service)
        stopped_engine = stopped_engine or name == "engine"
        killed_engine = killed_engine or (killed and name == "engine")
        _say(f"{name}: stopped (pid {service.pid}{', killed after 30s' if killed else ''})")
    # A killed dockerd leaves its socket behind; a client would take it for an engine.
    if killed_engine and socket.is_socket():
        socket.unlink()
        _say(f"removed {socket}")
    # dockerd leaves its network namespace mounted in its exec root; unmount what is
    # left under the sandbox, so that `rm -rf` of the root works after `down`.
    for mount in leftover_mounts(layout.root) if stopped_engine else []:
        door.run(door.Command(("umount", mount), description=f"unmount {mount}"), output="null")
    if purge:
        for link in layout.state.links:
            path = Path(link)
            if path.is_symlink():
                path.unlink()
                _say(f"removed {path}")
        layout.state.links = []
        for made in reversed(layout.state.folders):  # deepest first
            with contextlib.suppress(OSError):  # not empty, or gone: left as it is
                Path(made).rmdir()
                _say(f"removed {made}")
        layout.state.folders = []
        for folder in (layout.prefix, layout.debs, layout.apt):
            if folder.exists():
                shutil.rmtree(folder)
                _say(f"removed {folder}")
        layout.installed.unlink(missing_ok=True)
    if layout.root.exists():
        layout.save_state()
    kept = f"{layout.docker_data} and {layout.registry_data}"
    _say(f"sandbox down: images and registry data kept in {kept}")


def where(settings: chosen.Settings) -> str:
    """The socket and port in the first line of `up` and `status`."""
    return f"engine at {settings.docker_host}, registry at {settings.registry}"


def machine_touches(layout: Layout) -> list[Touch]:
    """What `up` changes outside the root, with this sandbox's settings and paths."""
    return touches(layout.settings, str(layout.root), str(plugin_dir() / "docker-buildx"))


def leftover_mounts(root: Path, table: Path = Path("/proc/mounts")) -> list[str]:
    """Mount points under `root`, deepest first (no engine of ours may still be running)."""
    try:
        lines = table.read_text().splitlines()
    except OSError:
        return []
    prefix = str(root.resolve()) + "/"
    inside = [f[1] for f in map(str.split, lines) if len(f) > 1 and f[1].startswith(prefix)]
    return sorted(inside, key=len, reverse=True)
