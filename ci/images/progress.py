"""Read BuildKit's `--progress=plain` output back into steps.

Why: whether a cache works is visible only in BuildKit's log (`#12 CACHED` vs
`#12 DONE 15.0s`). The end-to-end tests and benchmarks/rocm_cache.py use this
to check that a warm build really imported every dependency step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER = re.compile(r"^#(\d+) \[(?:([^\]\s]+)\s+)?(\d+)/(\d+)\] (.*)$")
_OTHER = re.compile(r"^#(\d+) (\[internal\] .*|(?!(?:DONE|CACHED|ERROR)\b)[a-z].*)$")
_STATUS = re.compile(r"^#(\d+) (?:(DONE) (\d+(?:\.\d+)?)s|(CACHED)|(ERROR)\b(.*))$")


@dataclass
class BuildVertex:
    """One build vertex: `[stage i/n] INSTRUCTION`, or an unnumbered one (cache import...)."""

    vertex: int
    name: str
    stage: str | None = None
    index: int | None = None
    status: str | None = None  # CACHED, DONE or ERROR
    seconds: float | None = None
    detail: str = ""

    @property
    def instruction(self) -> str:
        return self.name.split(" ", 1)[0] if self.index is not None else ""


def parse(text: str) -> list[BuildVertex]:
    """Steps in the order BuildKit first announced them."""
    steps: dict[int, BuildVertex] = {}
    for line in text.splitlines():
        if m := _HEADER.match(line):
            vertex = int(m.group(1))
            steps.setdefault(vertex, BuildVertex(vertex, m.group(5), m.group(2), int(m.group(3))))
        elif m := _STATUS.match(line):
            step = steps.setdefault(int(m.group(1)), BuildVertex(int(m.group(1)), ""))
            step.status = m.group(2) or m.group(4) or m.group(5)
            step.seconds = float(m.group(3)) if m.group(3) else step.seconds
            if m.group(5):
                step.detail = m.group(6).strip(" :")
        elif (m := _OTHER.match(line)) and int(m.group(1)) not in steps:
            steps[int(m.group(1))] = BuildVertex(int(m.group(1)), m.group(2))
    return list(steps.values())


def stage_steps(steps: list[BuildVertex], stage: str) -> list[BuildVertex]:
    """A stage's numbered steps in Dockerfile order; its FROM (a base resolution) left out."""
    found = [s for s in steps if s.stage == stage and s.index is not None]
    return sorted((s for s in found if s.instruction != "FROM"), key=lambda s: s.index or 0)
