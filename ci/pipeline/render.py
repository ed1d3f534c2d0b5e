"""Test-pipeline mode of the uploader as one pure function.

No git, files or upload: `upload-pipeline`, `lint-pipelines` and `plan` all call
`render_test_pipeline`, so they agree by construction. Every problem is collected
(one `error:` line each, exit 1), where the original stopped at the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ci.errors import Failure, TaskError
from ci.pipeline import mirror, model, sourcefilter, stepshape
from ci.pipeline.registries import Registries

Scope = Literal["diff", "all", "e2e"]
E2E_GROUP = "E2E Test"

# Why a step (or group, or child pipeline) does not run; `plan` adds skip-ci, if-false, duplicate.
DropReason = Literal[
    "skip-ci",  # the skip-ci decision turned it off
    "source-filter",  # no changed path under its source_file_dependencies
    "mirror-hw",  # MIRROR_HW (CUDA) or the AMD mirror list leaves it out
    "no-chip",  # its pytest -m names no chip with a preset
    "empty-group",  # every child of the group was dropped
    "if-false",  # a Buildkite `if` (of the step or a group) is false for this build
    "e2e-scope",  # `--scope e2e` keeps only the E2E groups
    "duplicate",  # AMD: identical to a step of an earlier suite
    "error",  # the step could not be rendered (see the platform's errors)
]


@dataclass(frozen=True)
class Kept:
    """A step the render keeps, where it sits and the preset it got."""

    label: str
    path: tuple[str, ...]  # labels of the enclosing groups
    preset: str | None
    step: model.Step
    # `if` strings of the enclosing groups, then of the step (parse with ci.pipeline.ifexpr)
    conditions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Dropped:
    """One step (or group, or child pipeline) left out, and why."""

    label: str
    groups: tuple[str, ...]  # labels of the enclosing groups
    reason: DropReason
    detail: str = ""


@dataclass
class Rendered:
    """The pipeline to upload, and an account of every step."""

    tree: model.Pipeline
    kept: list[Kept] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    bypassed_by: str | None = None

    @property
    def pipeline(self) -> model.Document:
        """The pipeline as it is uploaded (plain data)."""
        return model.emit(self.tree)


SHOWN_PREFIXES = 3  # a dropped step's log line names this many of its paths


def summary(prefixes: Sequence[str]) -> str:
    """The first few prefixes and how many more: a step can list some 60 paths, and the
    log has one line per dropped step (the whole list stays in `Dropped.detail`)."""
    more = len(prefixes) - SHOWN_PREFIXES
    shown = ", ".join(prefixes[:SHOWN_PREFIXES])
    return f"{shown}, … and {more} more" if more > 0 else shown


def _path(outer: tuple[model.Group, ...]) -> tuple[str, ...]:
    return tuple(model.name_of(g.fields) for g in outer)


@dataclass
class _Walk:
    """One pass of the source filter and the hardware expansion over the steps."""

    registries: Registries
    selector: str | None
    changed: Sequence[str] | None
    out: Rendered
    source: str = ""
    prefixes: dict[int, tuple[str, ...] | None] = field(default_factory=dict)
    failed: set[int] = field(default_factory=set)

    def resolve(self, entry: model.Step | model.Group) -> tuple[str, ...] | None:
        key = id(entry)
        if key not in self.prefixes:
            try:
                self.prefixes[key] = sourcefilter.prefixes_of(entry.fields, self.registries.sources)
            except TaskError as exc:
                self.out.problems.extend(exc.problems)
                self.prefixes[key] = None
                self.failed.add(key)
        return self.prefixes[key]

    def gated(self, entries: Sequence[model.Node]) -> list[tuple[str, ...]]:
        """The prefixes of every step and group that has them (the bypass rule reads these)."""
        return [p for p in map(self.resolve, model.every(entries)) if p is not None]

    def drop(
        self, entry: model.Node, outer: tuple[model.Group, ...], why: DropReason, detail: str = ""
    ) -> None:
        label = model.name_of({} if isinstance(entry, model.Shorthand) else entry.fields)
        self.out.dropped.append(Dropped(label, _path(outer), why, detail))

    def _filtered(self, entry: model.Step | model.Group, outer: tuple[model.Group, ...]) -> bool:
        """True when the entry is dropped: its registry key failed, or the diff misses it."""
        prefixes = self.resolve(entry)
        if id(entry) in self.failed:
            self.drop(entry, outer, "error")
            return True
        if self.changed is None or prefixes is None or sourcefilter.matches(prefixes, self.changed):
            return False
        said = summary(prefixes)
        self.out.log.append(f"skip {model.name_of(entry.fields)!r} (no changes under [{said}])")
        self.drop(entry, outer, "source-filter", ", ".join(prefixes))  # all of them (plan)
        return True

    def group(self, entry: model.Group, outer: tuple[model.Group, ...]) -> model.Group | None:
        if self._filtered(entry, outer):
            return None
        return entry.replace(**{sourcefilter.FIELD: model.Step.DELETE})

    def empty(self, entry: model.Group, outer: tuple[model.Group, ...]) -> None:
        self.out.log.append(f"omit empty group {model.name_of(entry.fields)!r}")
        self.drop(entry, outer, "empty-group")

    def step(self, entry: model.Step, outer: tuple[model.Group, ...]) -> model.Step | None:
        if self._filtered(entry, outer):
            return None
        if sourcefilter.FIELD in entry:
            entry = entry.replace(**{sourcefilter.FIELD: model.Step.DELETE})
        try:
            # a mapping or a number is no command; parallelism 0 or 10**9 no job count
            Failure.collect(stepshape.problems(entry.fields, self.source))
            done = mirror.expand(entry.fields, self.selector, self.registries)
        except TaskError as exc:
            self.out.problems.extend(exc.problems)
            self.drop(entry, outer, "error")
            return None
        self.out.log.extend(done.log)
        if done.step is None:
            self.drop(entry, outer, done.dropped or "no-chip", done.log[0] if done.log else "")
            return None
        kept = entry if done.step is entry.fields else model.Step(done.step)
        ifs = tuple(c for e in (*outer, entry) if isinstance(c := e.get("if"), str))
        self.out.kept.append(
            Kept(model.name_of(entry.fields), _path(outer), done.preset, kept, ifs)
        )
        return kept

    def steps(self, entries: Sequence[model.Node]) -> tuple[model.Node, ...]:
        return model.prune(entries, self.step, on_group=self.group, on_empty=self.empty)


def render_test_pipeline(
    document: Any,
    *,
    scope: Scope,
    registries: Registries,
    changed: Sequence[str] | None = None,
    mirror_hw: str | None = None,
    pipeline_path: str | None = None,
    source: str = "pipeline",
) -> Rendered:
    """Filter and expand one test YAML; problems are collected in `Rendered.problems`.
    `changed` (None: unknown) filters only under `scope="diff"` (see `sourcefilter.bypass`)."""
    if not isinstance(document, dict):
        raise Failure(f"invalid pipeline YAML: {source}")
    selector = mirror.parse_mirror_hw(mirror_hw)
    tree = model.parse(document)
    out = Rendered(tree)
    if tree.steps is None:
        return out
    steps = tree.steps
    filter_by = list(changed) if scope == "diff" and changed is not None else None
    walk = _Walk(registries, selector, filter_by, out, source)
    if scope == "e2e":
        chosen = tuple(s for s in steps if _is_e2e(s))
        for s in steps:
            if s not in chosen:
                walk.drop(s, (), "e2e-scope")
        found = f"keep {len(chosen)} group(s)" if chosen else "no group"
        out.log.append(f"{found} matching {E2E_GROUP!r}" + ("" if chosen else " found"))
        steps = chosen
    if filter_by is not None:
        try:
            bypass = sourcefilter.bypass(
                walk.gated(steps), filter_by, pipeline_path, registries.sources
            )
        except TaskError as exc:
            out.problems.extend(exc.problems)
            bypass = None
        if bypass is not None:
            out.log.append(f"keep all jobs (no {sourcefilter.FIELD} match; bypassed by {bypass})")
            out.bypassed_by = bypass
            walk.changed = filter_by = None
    out.tree = tree.with_steps(walk.steps(steps))
    return out


def _is_e2e(entry: model.Node) -> bool:
    """A top-level entry the e2e scope keeps: its `group` name contains "E2E Test"."""
    name = entry.get("group") if not isinstance(entry, model.Shorthand) else None
    return isinstance(name, str) and E2E_GROUP in name
