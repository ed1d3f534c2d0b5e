"""A step's `parallelism`: absent, or a whole number of jobs from 1 to `MAX_PARALLELISM`.

Buildkite's schema says only "integer". Every consumer reads the field here (the
uploader's render, lint-pipelines, the AMD suites, the local tiers), so none takes
what another refuses: 0 or a negative number is no job at all, and a local tier plans
one job per shard, so `parallelism: 1000000000` ended in an out-of-memory kill.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ci.errors import FAILURE, UserError
from ci.pipeline.commands import step_name

FIELD = "parallelism"
# Far above any real step (the vLLM-Omni pipelines use 2 to 4); a tier plans that many jobs.
MAX_PARALLELISM = 1000


def _count(value: Any) -> int | None:
    """The number of jobs `value` asks for: a YAML integer (Buildkite's schema, which every
    upload is checked against, takes no `"3"`); None for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def problems(step: Mapping[str, Any], source: str = "") -> list[str]:
    """One line when the step's `parallelism` is written and is not 1..MAX_PARALLELISM."""
    value = step.get(FIELD)
    if value is None:
        return []
    count = _count(value)
    if count is not None and 1 <= count <= MAX_PARALLELISM:
        return []
    where = f"{source}: " if source else ""
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
    return [
        f"{where}step {step_name(step)}: `{FIELD}` must be a whole number of jobs from 1 to "
        f"{MAX_PARALLELISM}, got {shown}"
    ]


def parallelism_of(step: Mapping[str, Any], source: str = "") -> int:
    """The step's job count (1 when not written); one error line, exit 1, when out of range."""
    UserError.collect(problems(step, source), code=FAILURE)
    count = _count(step.get(FIELD))
    return 1 if count is None else count
