"""`sandbox up`, `status` and `down`: the parts in order, one line each, on stdout.

stdout carries the result (one line per part, then the total); the commands
that `up` runs are echoed on stderr like every other task's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

from ci import door
from ci.errors import FAILURE, Stop, UserError
from ci.sandbox.layout import Layout, default_root
from ci.sandbox.parts import PARTS

ACTIONS = ("up", "status", "down")


def _say(line: str) -> None:
    print(line, flush=True)


def _layout(root: str) -> Layout:
    # os.path's expansion: an unknown `~user` stays as written, as in a shell (pathlib raises).
    return Layout(Path(os.path.expanduser(root)) if root else default_root())


def up(root: str = "") -> None:
    """Bring up every part in order; a part that fails stops `up` (exit 1) with its reason."""
    layout = _layout(root)
    try:
        layout.run.mkdir(parents=True, exist_ok=True)  # the parts' logs and configs
    except OSError as exc:  # HOME a file, a read-only --root: before anything is started
        raise UserError(
            f"sandbox folder {layout.root}: cannot create it: {exc.strerror or exc}"
            " (choose another with --root or VLLM_OMNI_CI_SANDBOX)"
        ) from None
    began = time.monotonic()
    _say(f"sandbox: {layout.root}")
    for part in PARTS:
        try:  # a part that cannot come up raises `Failure` (exit 1) with its reason
            verb, detail = part.bring_up(layout)
        finally:
            layout.save_state()
        _say(f"{part.name}: {verb}: {detail}")
    _say(f"sandbox up: {len(PARTS)} parts ready in {time.monotonic() - began:.1f}s")


def status(root: str = "", *, as_json: bool = False) -> None:
    """Each part ok or missing, with its fix; exit 1 when one is missing."""
    layout = _layout(root)
    found = [part.check(layout) for part in PARTS]
    ok, root_text = all(c.ok for c in found), str(layout.root)
    if as_json:
        parts = [dataclasses.asdict(c) for c in found]
        _say(json.dumps({"root": root_text, "ok": ok, "parts": parts}, indent=2))
    else:
        _say(f"sandbox: {root_text}")
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
    stopped_engine = False
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
        _say(f"{name}: stopped (pid {service.pid}{', killed after 30s' if killed else ''})")
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
        for folder in (layout.prefix, layout.debs, layout.apt):
            if folder.exists():
                shutil.rmtree(folder)
                _say(f"removed {folder}")
        layout.installed.unlink(missing_ok=True)
    if layout.root.exists():
        layout.save_state()
    kept = f"{layout.docker_data} and {layout.registry_data}"
    _say(f"sandbox down: images and registry data kept in {kept}")


def leftover_mounts(root: Path, table: Path = Path("/proc/mounts")) -> list[str]:
    """Mount points under `root`, deepest first (no engine of ours may still be running)."""
    try:
        lines = table.read_text().splitlines()
    except OSError:
        return []
    prefix = str(root.resolve()) + "/"
    inside = [f[1] for f in map(str.split, lines) if len(f) > 1 and f[1].startswith(prefix)]
    return sorted(inside, key=len, reverse=True)


def parse_action(value: str) -> str:
    if value not in ACTIONS:
        raise UserError(f"action: unknown value {value!r}: allowed values are up, status, down")
    return value
