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

    def to_json(self) -> str:
        data = {
            "services": {name: asdict(s) for name, s in self.services.items()},
            "links": self.links,
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


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
            services[str(name)] = door.Service(
                pid=int(raw["pid"]),
                started=float(raw["started"]),
                argv=tuple(str(a) for a in raw["argv"]),
                log=str(raw["log"]),
            )
        except (KeyError, TypeError, ValueError):
            continue
    links = [str(link) for link in data.get("links") or []]
    return State(services, links)


def save(layout: Layout, state: State) -> None:
    layout.root.mkdir(parents=True, exist_ok=True)
    tmp = layout.state.with_suffix(".tmp")
    tmp.write_text(state.to_json())
    tmp.replace(layout.state)
