"""Buildkite pipelines as typed values: parsed once, walked one way, emitted one way.

A `Pipeline` holds `Group`s (a mapping with a `steps` list), `Step`s (any other
mapping) and `Shorthand`s (`- wait`, kept as is). Keys keep their written order, so
what is emitted is what was read except for a task's changes (`Step.replace`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias, TypeVar

# A step's own keys as written in the YAML: the one untyped part of the model.
Fields: TypeAlias = Mapping[str, Any]
# A pipeline (or step) as plain YAML data: what `parse` takes and `emit` gives.
Document: TypeAlias = dict[str, Any]
_DELETE: Any = object()


class _Keyed:
    """An entry's keys as written (`fields`), read and replaced alike for steps and groups."""

    fields: Fields
    DELETE: ClassVar[Any] = _DELETE  # a `replace` value that removes the key

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)

    def replace(self: K, **changes: Any) -> K:
        """A copy with keys set in place (new keys at the end); `Step.DELETE` removes one."""
        fields = _replaced(self.fields, changes)
        return dataclasses.replace(self, fields=fields)  # type: ignore[type-var]


K = TypeVar("K", bound=_Keyed)


@dataclass(frozen=True, eq=False)
class Step(_Keyed):
    """One non-group step, with its keys as written."""

    fields: Fields

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    def __contains__(self, name: str) -> bool:
        return name in self.fields

    @property
    def key(self) -> str:
        value = self.fields.get("key")
        return value if isinstance(value, str) else ""


@dataclass(frozen=True, eq=False)
class Group(_Keyed):
    """A group step: its keys as read (`steps` holds its place for `emit`) and its children."""

    fields: Fields
    steps: tuple[Node, ...]

    def with_steps(self, steps: Iterable[Node]) -> Group:
        return Group(self.fields, tuple(steps))


@dataclass(frozen=True, eq=False)
class Shorthand:
    """An entry that is not a mapping (`wait`, `block`, or anything else written there)."""

    value: Any


Node: TypeAlias = Step | Group | Shorthand


@dataclass(frozen=True, eq=False)
class Pipeline:
    """A pipeline document: its own keys and its steps (None without a `steps` list)."""

    fields: Fields
    steps: tuple[Node, ...] | None

    def with_steps(self, steps: Iterable[Node]) -> Pipeline:
        return Pipeline(self.fields, tuple(steps))


def name_of(fields: Fields, default: str = "<step>") -> str:
    """What every message and report calls a step or group: `group`, `label` or `name`
    (Buildkite's alias of `label`), else its `key`, else `default`."""
    found = (fields.get(k) for k in ("group", "label", "name", "key"))
    return next((str(v) for v in found if v and str(v).strip()), default)


def node(entry: Any) -> Node:
    """One entry of a `steps` list, typed."""
    if not isinstance(entry, Mapping):
        return Shorthand(entry)
    children = entry.get("steps")
    return Group(entry, nodes(children)) if isinstance(children, list) else Step(entry)


def nodes(entries: Iterable[Any]) -> tuple[Node, ...]:
    return tuple(node(e) for e in entries)


def parse(document: Any) -> Pipeline:
    """A parsed YAML document (a mapping, or a bare list of steps) as a `Pipeline`; a
    `Pipeline` is returned as it is, so a function can take either form."""
    if isinstance(document, Pipeline):
        return document
    if isinstance(document, list):
        return Pipeline({}, nodes(document))
    fields = document if isinstance(document, Mapping) else {}
    steps = fields.get("steps")
    return Pipeline(fields, nodes(steps) if isinstance(steps, list) else None)


def emit(value: Pipeline) -> Document:
    """The pipeline as plain data for YAML, the schema and the upload (keys in their order)."""
    if value.steps is None:
        return dict(value.fields)
    # `steps` stays in its written place (a dict keeps a replaced key's position), else last.
    return {**value.fields, "steps": emit_nodes(value.steps)}


def emit_nodes(entries: Iterable[Node]) -> list[Any]:
    return [emit_node(n) for n in entries]


def emit_node(entry: Node) -> Any:
    if isinstance(entry, Shorthand):
        return entry.value
    if isinstance(entry, Group):
        return {**entry.fields, "steps": emit_nodes(entry.steps)}  # in place, as `emit`
    return dict(entry.fields)


def leaves(
    entries: Iterable[Node], outer: tuple[Group, ...] = ()
) -> Iterator[tuple[Step, tuple[Group, ...]]]:
    """Every `Step`, depth first, with the groups around it (outermost first)."""
    for entry in entries:
        if isinstance(entry, Group):
            yield from leaves(entry.steps, (*outer, entry))
        elif isinstance(entry, Step):
            yield entry, outer


def every(entries: Iterable[Node]) -> Iterator[Step | Group]:
    """Every step and group, each before its children, in document order."""
    for entry in entries:
        if isinstance(entry, Group):
            yield entry
            yield from every(entry.steps)
        elif isinstance(entry, Step):
            yield entry


StepRule: TypeAlias = Callable[[Step, tuple[Group, ...]], "Step | Iterable[Node] | None"]
GroupRule: TypeAlias = Callable[[Group, tuple[Group, ...]], "Group | None"]


def prune(
    entries: Iterable[Node],
    on_step: StepRule,
    *,
    on_group: GroupRule | None = None,
    on_empty: Callable[[Group, tuple[Group, ...]], None] | None = None,
    keep_empty: bool = False,
) -> tuple[Node, ...]:
    """The tree with each step mapped by `on_step` (a step, nodes in its place, or None) and
    each group by `on_group` (None drops it); a group left empty goes to `on_empty` and is
    left out (kept, with no steps, under `keep_empty`). Shorthands stay."""

    def walk(entries: Iterable[Node], outer: tuple[Group, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for entry in entries:
            if isinstance(entry, Shorthand):
                out.append(entry)
            elif isinstance(entry, Group):
                entered = entry if on_group is None else on_group(entry, outer)
                if entered is None:
                    continue
                children = walk(entered.steps, (*outer, entry))
                if children or keep_empty:
                    out.append(entered.with_steps(children))
                elif on_empty is not None:
                    on_empty(entry, outer)
            else:
                made = on_step(entry, outer)
                if isinstance(made, Step):
                    out.append(made)
                elif made is not None:
                    out.extend(made)
        return tuple(out)

    return walk(entries, ())


def _replaced(fields: Fields, changes: Mapping[str, Any]) -> Document:
    """`fields` with `changes` applied in place (new keys last, `_DELETE` removes)."""
    out = {k: changes.get(k, v) for k, v in fields.items()}
    out.update({k: v for k, v in changes.items() if k not in out})
    return {k: v for k, v in out.items() if v is not _DELETE}
