"""Test-pipeline mode of the uploader as one pure function.

`render_test_pipeline`: MIRROR_HW checked, E2E groups only under the e2e scope, the
fallback bypass, then the source filter and hardware expansion per step; returns
what it kept and dropped, and why. Pure, so `upload-pipeline`, `lint-pipelines` and
`plan` agree; every problem is collected (one `error:` line each, exit 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ci.errors import FAILURE, UserError
from ci.pipeline import commands, mirror, model, sourcefilter
from ci.pipeline.registries import Registries
from ci.pipeline.sourcefilter import step_label

Scope = Literal["diff", "all", "e2e"]
SCOPES: tuple[str, ...] = ("diff", "all", "e2e", "auto")
E2E_GROUP = "E2E Test"

DropReason = Literal["source-filter", "mirror-hw", "no-chip", "empty-group", "e2e-scope", "error"]


@dataclass(frozen=True)
class Kept:
    label: str
    path: tuple[str, ...]  # labels of the enclosing groups
    preset: str | None
    step: model.Step
    # `if` strings of the enclosing groups, then of the step (parse with ci.pipeline.ifexpr)
    conditions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Dropped:
    label: str
    path: tuple[str, ...]
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
    filtering: bool = False
    bypassed_by: str | None = None

    @property
    def pipeline(self) -> model.Document:
        """The pipeline as it is uploaded (plain data)."""
        return model.emit(self.tree)

    def raise_problems(self) -> None:
        """One `error:` line per problem, exit 1 (the uploader's validation code)."""
        UserError.collect(dict.fromkeys(self.problems), code=FAILURE)

    def labels(self) -> list[str]:
        return [k.label for k in self.kept]


def _path(outer: tuple[model.Group, ...]) -> tuple[str, ...]:
    return tuple(step_label(g.fields) for g in outer)


def _conditions(entries: tuple[model.Group, ...], own: model.Step | model.Group) -> tuple[str, ...]:
    """The `if` strings of the enclosing groups, then of the step itself."""
    found = (g.get("if") for g in (*entries, own))
    return tuple(c for c in found if isinstance(c, str))


class _Walk:
    """One pass of the source filter and the hardware expansion over the steps."""

    def __init__(
        self,
        registries: Registries,
        selector: str | None,
        changed: Sequence[str] | None,
        out: Rendered,
        source: str = "",
    ) -> None:
        self.source = source
        self.registries = registries
        self.selector = selector
        self.changed = changed
        self.out = out
        self.prefixes: dict[int, tuple[str, ...] | None] = {}
        self.failed: set[int] = set()

    def resolve(self, entry: model.Step | model.Group) -> tuple[str, ...] | None:
        key = id(entry)
        if key not in self.prefixes:
            try:
                self.prefixes[key] = sourcefilter.prefixes_of(entry.fields, self.registries.sources)
            except UserError as exc:
                self.out.problems.extend(exc.problems)
                self.prefixes[key] = None
                self.failed.add(key)
        return self.prefixes[key]

    def gated(self, entries: Sequence[model.Node]) -> list[tuple[str, ...]]:
        """The prefixes of every step and group that has them (the bypass rule reads these)."""
        return [p for p in map(self.resolve, model.every(entries)) if p is not None]

    def drop(self, entry: model.Node, outer: tuple[model.Group, ...], why: DropReason) -> None:
        label = step_label(entry.value if isinstance(entry, model.Shorthand) else entry.fields)
        self.out.dropped.append(Dropped(label, _path(outer), why))

    def _filtered(self, entry: model.Step | model.Group, outer: tuple[model.Group, ...]) -> bool:
        """True when the entry is dropped: its registry key failed, or the diff misses it."""
        prefixes = self.resolve(entry)
        if id(entry) in self.failed:
            self.drop(entry, outer, "error")
            return True
        if self.changed is None or prefixes is None:
            return False
        if sourcefilter.matches(prefixes, self.changed):
            return False
        label, shown = step_label(entry.fields), ", ".join(prefixes)
        self.out.log.append(f"skip {label!r} (no changes under [{shown}])")
        self.out.dropped.append(Dropped(label, _path(outer), "source-filter", shown))
        return True

    def group(self, entry: model.Group, outer: tuple[model.Group, ...]) -> model.Group | None:
        if self._filtered(entry, outer):
            return None
        return entry.replace(**{sourcefilter.FIELD: model.Step.DELETE})

    def empty(self, entry: model.Group, outer: tuple[model.Group, ...]) -> None:
        self.out.log.append(f"omit empty group {step_label(entry.fields)!r}")
        self.drop(entry, outer, "empty-group")

    def step(self, entry: model.Step, outer: tuple[model.Group, ...]) -> model.Step | None:
        if self._filtered(entry, outer):
            return None
        label, path = step_label(entry.fields), _path(outer)
        if sourcefilter.FIELD in entry:
            entry = entry.replace(**{sourcefilter.FIELD: model.Step.DELETE})
        body = dict(entry.fields) if not isinstance(entry.fields, dict) else entry.fields
        try:
            # a mapping or a number is no command
            UserError.collect(commands.problems(entry.fields, self.source), code=FAILURE)
            done = mirror.expand(body, self.selector, self.registries)
        except UserError as exc:
            self.out.problems.extend(exc.problems)
            self.drop(entry, outer, "error")
            return None
        self.out.log.extend(done.log)
        if done.step is None:
            reason: DropReason = "mirror-hw" if done.dropped == "mirror-hw" else "no-chip"
            self.out.dropped.append(Dropped(label, path, reason, done.log[0] if done.log else ""))
            return None
        kept = entry if done.step is entry.fields else model.Step(done.step)
        self.out.kept.append(Kept(label, path, done.preset, kept, _conditions(outer, entry)))
        return kept

    def steps(self, entries: Sequence[model.Node]) -> tuple[model.Node, ...]:
        return model.prune(entries, self.step, on_group=self.group, on_empty=self.empty)


def render_test_pipeline(
    document: Any,
    *,
    scope: Scope,
    changed: Sequence[str] | None,
    registries: Registries,
    mirror_hw: str | None = None,
    pipeline_path: str | None = None,
    source: str = "pipeline",
) -> Rendered:
    """Filter and expand one test YAML; problems are collected in `Rendered.problems`.

    `changed` (None: unknown) filters only under `scope="diff"`; when no step
    matches it, a change to `pipeline_path` or a fallback prefix keeps every job."""
    if not isinstance(document, dict):
        raise UserError(f"invalid pipeline YAML: {source}", code=FAILURE)
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
        out.log.append(
            f"keep {len(chosen)} group(s) matching {E2E_GROUP!r}"
            if chosen
            else f"no group matching {E2E_GROUP!r} found"
        )
        steps = chosen
    if filter_by is not None:
        try:
            bypass = sourcefilter.bypass(
                walk.gated(steps), filter_by, pipeline_path, registries.sources
            )
        except UserError as exc:
            out.problems.extend(exc.problems)
            bypass = None
        if bypass is not None:
            out.log.append(
                f"keep all jobs (no source_file_dependencies match; bypassed by {bypass})"
            )
            out.bypassed_by = bypass
            walk.changed = filter_by = None
    out.filtering = filter_by is not None
    out.tree = tree.with_steps(walk.steps(steps))
    return out


def _is_e2e(entry: model.Node) -> bool:
    """A top-level entry the e2e scope keeps: its `group` name contains "E2E Test"."""
    name = entry.get("group") if not isinstance(entry, model.Shorthand) else None
    return isinstance(name, str) and E2E_GROUP in name
