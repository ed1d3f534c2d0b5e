"""Test-pipeline mode of the uploader as one pure function (spec §3.3 to §3.6).

`render_test_pipeline` takes the parsed YAML, the scope and the changed paths,
and returns the pipeline to upload together with what it kept, what it dropped
and why. No git, no files, no upload: the task layer (`ci.pipeline.upload`)
feeds it, `lint-pipelines` runs it over every file, and `plan` reads its
`kept`/`dropped` lists, so all three agree by construction.

Unlike the original, which stopped at the first problem, every problem is
collected and reported at once (one `error:` line each, exit 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ci.errors import FAILURE, UserError
from ci.pipeline import commands, mirror, sourcefilter
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
    step: dict[str, Any]
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

    pipeline: dict[str, Any]
    kept: list[Kept] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    filtering: bool = False
    bypassed_by: str | None = None

    def raise_problems(self) -> None:
        """One `error:` line per problem, exit 1 (the uploader's validation code)."""
        UserError.collect(dict.fromkeys(self.problems), code=FAILURE)

    def labels(self) -> list[str]:
        return [k.label for k in self.kept]


class _Walk:
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

    def problem(self, exc: UserError) -> None:
        self.out.problems.extend(exc.problems)

    def resolve(self, step: Any) -> tuple[str, ...] | None:
        key = id(step)
        if key not in self.prefixes:
            try:
                self.prefixes[key] = sourcefilter.prefixes_of(step, self.registries.sources)
            except UserError as exc:
                self.problem(exc)
                self.prefixes[key] = None
                self.failed.add(key)
        return self.prefixes[key]

    def gated(self, steps: Sequence[Any]) -> list[tuple[str, ...]]:
        found: list[tuple[str, ...]] = []
        for step in steps:
            prefixes = self.resolve(step)
            if prefixes is not None:
                found.append(prefixes)
            if isinstance(step, dict) and isinstance(step.get("steps"), list):
                found += self.gated(step["steps"])
        return found

    def steps(
        self, steps: Sequence[Any], path: tuple[str, ...], conditions: tuple[str, ...] = ()
    ) -> list[Any]:
        result = []
        for step in steps:
            kept = self.step(step, path, conditions)
            if kept is not None:
                result.append(kept)
        return result

    def step(self, step: Any, path: tuple[str, ...], conditions: tuple[str, ...]) -> Any:
        if not isinstance(step, dict):
            return step
        label = step_label(step)
        if isinstance(step.get("if"), str):
            conditions = (*conditions, step["if"])
        prefixes = self.resolve(step)
        if id(step) in self.failed:
            self.out.dropped.append(Dropped(label, path, "error"))
            return None
        if (
            self.changed is not None
            and prefixes is not None
            and not sourcefilter.matches(prefixes, self.changed)
        ):
            shown = ", ".join(prefixes)
            self.out.log.append(f"skip {label!r} (no changes under [{shown}])")
            self.out.dropped.append(Dropped(label, path, "source-filter", shown))
            return None
        body = (
            {k: v for k, v in step.items() if k != sourcefilter.FIELD}
            if sourcefilter.FIELD in step
            else step
        )
        if isinstance(step.get("steps"), list):
            children = self.steps(step["steps"], (*path, label), conditions)
            if not children:
                self.out.log.append(f"omit empty group {label!r}")
                self.out.dropped.append(Dropped(label, path, "empty-group"))
                return None
            return {**body, "steps": children}
        wrong = commands.problems(step, self.source)  # a mapping or a number is no command
        if wrong:
            self.out.problems.extend(wrong)
            self.out.dropped.append(Dropped(label, path, "error"))
            return None
        try:
            done = mirror.expand(body, self.selector, self.registries)
        except UserError as exc:
            self.problem(exc)
            self.out.dropped.append(Dropped(label, path, "error"))
            return None
        self.out.log.extend(done.log)
        if done.step is None:
            reason: DropReason = "mirror-hw" if done.dropped == "mirror-hw" else "no-chip"
            self.out.dropped.append(Dropped(label, path, reason, done.log[0] if done.log else ""))
            return None
        self.out.kept.append(Kept(label, path, done.preset, done.step, conditions))
        return done.step


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

    `changed` is the diff (repo-relative paths, None = unknown); it is used only
    for `scope="diff"`. `mirror_hw` is the raw MIRROR_HW value (validated here,
    before any step). `pipeline_path` is the file's repo-relative POSIX path:
    a diff touching it can bypass the filter (spec §3.5).
    """
    if not isinstance(document, dict):
        raise UserError(f"invalid pipeline YAML: {source}", code=FAILURE)
    selector = mirror.parse_mirror_hw(mirror_hw)
    out = Rendered(pipeline=dict(document))
    steps = document.get("steps")
    if not isinstance(steps, list):
        return out
    filter_by = list(changed) if scope == "diff" and changed is not None else None
    if scope == "e2e":
        chosen = [
            s
            for s in steps
            if isinstance(s, dict) and isinstance(s.get("group"), str) and E2E_GROUP in s["group"]
        ]
        for s in steps:
            if not any(s is c for c in chosen):
                out.dropped.append(Dropped(step_label(s), (), "e2e-scope"))
        out.log.append(
            f"keep {len(chosen)} group(s) matching {E2E_GROUP!r}"
            if chosen
            else f"no group matching {E2E_GROUP!r} found"
        )
        steps = chosen
    walk = _Walk(registries, selector, filter_by, out, source)
    if filter_by is not None:
        try:
            bypass = sourcefilter.bypass(
                walk.gated(steps), filter_by, pipeline_path, registries.sources
            )
        except UserError as exc:
            walk.problem(exc)
            bypass = None
        if bypass is not None:
            out.log.append(
                f"keep all jobs (no source_file_dependencies match; bypassed by {bypass})"
            )
            out.bypassed_by = bypass
            walk.changed = filter_by = None
    out.filtering = filter_by is not None
    out.pipeline["steps"] = walk.steps(steps, ())
    return out
