"""What `sandbox up` started or linked, so that `down` undoes exactly that and nothing else.

A JSON file in the sandbox root. A service is remembered by pid *and* start
time (door.Service), so a pid reused by another program is never signalled.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ci import door
from ci.sandbox.layout import Layout


@dataclass
class State:
    services: dict[str, door.Service] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)


def load(layout: Layout) -> State:
    try:
        data = json.loads(layout.state.read_text())
    except (OSError, ValueError):
        return State()
    if not isinstance(data, dict):
        return State()
    services: dict[str, door.Service] = {}
    for name, raw in (data.get("services") or {}).items():
        try:
            argv = tuple(str(a) for a in raw["argv"])
            services[str(name)] = door.Service(
                int(raw["pid"]), float(raw["started"]), argv, str(raw["log"])
            )
        except (KeyError, TypeError, ValueError):
            continue
    return State(services, [str(link) for link in data.get("links") or []])


def save(layout: Layout, state: State) -> None:
    layout.root.mkdir(parents=True, exist_ok=True)
    tmp = layout.state.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2, sort_keys=True) + "\n")
    tmp.replace(layout.state)
