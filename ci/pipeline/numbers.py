"""A step's whole-number fields, each within one bound that every consumer applies.

Buildkite's schema says only "integer" for `parallelism` and bounds
`timeout_in_minutes` from below. Every consumer reads these fields here (the
uploader's render, lint-pipelines, the AMD suites, shellcheck-steps, the local
tiers), so none takes what another refuses: `parallelism: 0` is no job at all, a
local tier plans one job per shard (`parallelism: 1000000000` ended in an
out-of-memory kill), turns the timeout into seconds (a 400-digit one was an
OverflowError) and reruns a failing job `retry.automatic` `limit` times.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ci.errors import Failure
from ci.pipeline.commands import step_name


@dataclass(frozen=True)
class Bound:
    """`low`..`high` `unit`; `typed`: anything but an integer is refused here too (else the
    schema check, which the uploader and lint-pipelines run, words that refusal)."""

    low: int
    high: int
    unit: str
    typed: bool = False


PARALLELISM = "parallelism"
# Far above any real step (the vLLM-Omni pipelines use 2 to 4); a tier plans that many jobs.
MAX_PARALLELISM = 1000
BOUNDS = {
    PARALLELISM: Bound(1, MAX_PARALLELISM, "jobs", typed=True),
    # A week: no CI job runs longer (the vLLM-Omni pipelines use up to 300).
    "timeout_in_minutes": Bound(1, 7 * 24 * 60, "minutes"),
}
RETRY_LIMIT = Bound(0, 10, "retries")  # Buildkite's schema: `retry.automatic` limit 0..10


def _whole(value: Any) -> int | None:
    """A YAML integer (Buildkite's schema, which every upload is checked against, takes no
    `"3"`); None for anything else, a boolean included."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _out_of(bound: Bound, value: Any) -> bool:
    number = _whole(value)
    if number is None:
        return bound.typed
    return not bound.low <= number <= bound.high


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _retry_limits(step: Mapping[str, Any]) -> Iterator[Any]:
    """The `limit` of each `retry.automatic` rule (a mapping, or a list of them)."""
    retry = step.get("retry")
    automatic = retry.get("automatic") if isinstance(retry, Mapping) else None
    for rule in automatic if isinstance(automatic, list) else [automatic]:
        if isinstance(rule, Mapping) and rule.get("limit") is not None:
            yield rule["limit"]


def problems(step: Mapping[str, Any], source: str = "") -> list[str]:
    """One line per bounded field that is written and out of its bound."""
    head = f"{source}: " if source else ""
    head += f"step {step_name(step)}: "
    found = [
        f"{head}`{name}` must be a whole number of {bound.unit} from {bound.low} to "
        f"{bound.high}, got {_shown(step[name])}"
        for name, bound in BOUNDS.items()
        if step.get(name) is not None and _out_of(bound, step[name])
    ]
    bound = RETRY_LIMIT
    found += [
        f"{head}`retry.automatic` `limit` must be a whole number of {bound.unit} from "
        f"{bound.low} to {bound.high}, got {_shown(limit)}"
        for limit in _retry_limits(step)
        if _out_of(bound, limit)
    ]
    return found


def parallelism_of(step: Mapping[str, Any], source: str = "") -> int:
    """The step's job count (1 when not written); one error line per problem, exit 1."""
    Failure.collect(problems(step, source))
    return _whole(step.get(PARALLELISM)) or 1
