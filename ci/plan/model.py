"""What `plan` found, as plain data: one `PlatformPlan` per platform.

Every output format is made from these values; `BuildPlan.as_dict()` is exactly
the documented JSON (`ci/data/plan.schema.json`, version `SCHEMA_VERSION`). A
pipeline is something that gets uploaded; its steps are the jobs that would
run, and `dropped` says what was left out and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Literal, TypeAlias

from ci.pipeline.render import Dropped

SCHEMA_ID = "vllm-omni-ci/plan"
SCHEMA_VERSION = 1

# `yes`: runs; `conditional`: an `if` outside the expression subset decides at build time.
Runs = Literal["yes", "conditional"]
PipelineStatus = Literal["uploaded", "conditional", "not-uploaded"]
PlatformStatus = Literal["run", "skip", "error"]
NOT_EVALUATED = "conditional, not evaluated"

# The plan as JSON data (`--format json`): the documented output, `ci/data/plan.schema.json`.
JsonObject: TypeAlias = dict[str, Any]


@dataclass(frozen=True)
class PlannedStep:
    """One job that would run."""

    label: str
    groups: tuple[str, ...] = ()
    queue: str | None = None
    preset: str | None = None
    parallelism: int | None = None
    timeout_in_minutes: int | None = None
    blocking: bool = field(init=False)  # not soft_fail (the JSON and the tables say both)
    soft_fail: bool = False
    runs: Runs = "yes"
    conditions: tuple[str, ...] = ()
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocking", not self.soft_fail)


@dataclass
class PlannedPipeline:
    """One uploaded (or not uploaded) pipeline of a platform."""

    name: str
    file: str | None
    status: PipelineStatus = "uploaded"
    reason: str = ""
    scope: str | None = None
    steps: list[PlannedStep] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)


@dataclass
class PlatformPlan:
    """Everything one platform's bootstrap would do for this change."""

    platform: str
    status: PlatformStatus = "run"
    reason: str = ""
    # Why the bootstrap chose these jobs, where the pipelines do not show it: the AMD
    # ready-suite fallback, suites and pipelines that run whole (no source-file filter).
    why: str = ""
    skip_ci: str = ""  # the skip-ci word for this platform (run, skip-all, skip-l23)
    pipelines: list[PlannedPipeline] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class BuildPlan:
    """The whole answer: inputs, the diff, the skip-ci decision, every platform."""

    repo: str
    diff: JsonObject
    inputs: JsonObject
    skip_ci: JsonObject
    # Where the checkout's pipelines still call scripts vllm-omni-ci replaced
    # (`ci.migrate.edits.old_calls`); any: its CI runs the old scripts, and the plan
    # shows what vllm-omni-ci's bootstraps would run (`migrated` false).
    migrated: bool = True
    old_calls: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    platforms: list[PlatformPlan] = field(default_factory=list)

    def platform(self, name: str) -> PlatformPlan:
        return next(p for p in self.platforms if p.platform == name)

    def as_dict(self) -> JsonObject:
        return {"schema": SCHEMA_ID, "version": SCHEMA_VERSION, **_json(self)}


def _json(value: Any) -> Any:
    """Dataclasses as objects (fields in order), tuples as lists: the documented JSON."""
    if is_dataclass(value):
        return {f.name: _json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, list | tuple):
        return [_json(item) for item in value]
    return value
