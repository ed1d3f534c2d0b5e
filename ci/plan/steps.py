"""Rendered Buildkite steps as plan rows, with their `if` conditions evaluated.

Each condition is read by `ci.pipeline.ifexpr` against what Buildkite would
know for this build (branch, PR labels, schedule env). False drops the step
(`if-false`); text outside the subset, or a test of an env var the plan does
not set, keeps it as "conditional, not evaluated" when it decides the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ci import topology
from ci.pipeline import ifexpr, model
from ci.pipeline.render import Dropped
from ci.plan.model import NOT_EVALUATED, PlannedStep


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def one_line(text: str) -> str:
    """A multi-line `if` (or any text) as the one line the plan shows."""
    return " ".join(text.split())


# The build env a plan knows: what its options set (off means unset). Any other
# `build.env(...)` (a schedule's own variable, a Buildkite one) is unknown here.
KNOWN_ENV = frozenset({*topology.SCHEDULE_ENV, "MIRROR_HW"})


def known_only(expr: ifexpr.Expr) -> ifexpr.Expr:
    """`expr` with each test of an env var outside `KNOWN_ENV` made opaque (not evaluated)."""
    if isinstance(expr, ifexpr.Compare) and isinstance(expr.subject, ifexpr.Env):
        if expr.subject.name not in KNOWN_ENV:
            return ifexpr.Opaque(ifexpr.render(expr), f"plan does not know {expr.subject.name}")
        return expr
    if isinstance(expr, ifexpr.Paren):
        return ifexpr.Paren(known_only(expr.inner))
    if isinstance(expr, ifexpr.And | ifexpr.Or):
        return type(expr)(tuple(known_only(p) for p in expr.parts))
    return expr


def verdict(conditions: Sequence[str], ctx: ifexpr.Context) -> tuple[bool | None, str]:
    """(True, "") runs; (False, text) an `if` is false; (None, text) not evaluable."""
    unknown = ""
    for text in conditions:
        value = ifexpr.evaluate(known_only(ifexpr.parse(text)), ctx)
        if value is False:
            return False, text
        if value is None and not unknown:
            unknown = text
    return (None, unknown) if unknown else (True, "")


def walk(
    steps: Iterable[model.Node] | None,
    ctx: ifexpr.Context,
    *,
    presets: Mapping[int, str | None] | None = None,
) -> tuple[list[PlannedStep], list[Dropped]]:
    """Rows of every leaf of a rendered pipeline; group `if`s apply to their children, and a
    false `if` drops the group or step. `presets`: `id()` of a rendered leaf -> the hardware
    preset it was expanded from."""
    kept: list[PlannedStep] = []
    dropped: list[Dropped] = []

    def visit(
        entries: Iterable[model.Node], names: tuple[str, ...], outer: tuple[str, ...]
    ) -> None:
        for entry in entries:
            if isinstance(entry, model.Shorthand) or "wait" in entry.fields:
                continue
            condition = entry.get("if")
            here = (*outer, condition) if isinstance(condition, str) else outer
            label = model.name_of(entry.fields)
            value, text = verdict(here, ctx)
            if value is False:
                dropped.append(Dropped(label, names, "if-false", f"if {one_line(text)}"))
            elif isinstance(entry, model.Group):
                visit(entry.steps, (*names, label), here)
            else:
                agents, soft = entry.get("agents"), entry.get("soft_fail")
                queue = agents.get("queue") if isinstance(agents, dict) else None
                kept.append(
                    PlannedStep(
                        label=label,
                        groups=names,
                        queue=None if queue is None else str(queue),
                        preset=(presets or {}).get(id(entry)),
                        parallelism=_int(entry.get("parallelism")),
                        timeout_in_minutes=_int(entry.get("timeout_in_minutes")),
                        soft_fail=bool(soft) and soft != "false",
                        runs="conditional" if value is None else "yes",
                        conditions=tuple(map(one_line, here)),
                        note=f"{NOT_EVALUATED}: {one_line(text)}" if value is None else "",
                    )
                )

    visit(steps or (), (), ())
    return kept, dropped


def labels_in(expr: ifexpr.Expr) -> set[str]:
    """The PR labels an expression tests (`build.pull_request.labels includes …`)."""
    if isinstance(expr, ifexpr.LabelIncludes):
        return {expr.label}
    if isinstance(expr, ifexpr.Paren):
        return labels_in(expr.inner)
    if isinstance(expr, ifexpr.And | ifexpr.Or):
        return set().union(*(labels_in(p) for p in expr.parts))
    return set()
