"""Step keys and `depends_on` inside one pipeline file: what Buildkite refuses or never runs.

Buildkite refuses an upload that uses a `key` twice, and a step that waits for itself
(its own key, or the group it sits in) or for a step that waits for it in turn, a
`depends_on` cycle, is never started. lint-pipelines reports each as an error, and a
local tier refuses to run such a file before any job starts (`ci.tiers.model`).

A group ends when its steps have ended, and its steps start only when its own
`depends_on` is met; keys the file does not define are other uploads' steps
(`upload-ready-pipeline`, `amd-build`) and are left alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ci.pipeline import model
from ci.pipeline.commands import step_name

N = TypeVar("N", int, str)  # a graph's node: an entry's index, or a name

Keys = tuple[str, ...]


@dataclass
class _Entry:
    """One step or group: what messages call it, its key, the keys its own `depends_on`
    names, those its groups' name (it starts only after both), its steps, its groups."""

    name: str
    key: str
    own: tuple[str, ...]
    inherited: tuple[str, ...]
    outer: tuple[int, ...]
    children: list[int] = field(default_factory=list)


def depends_keys(fields: Mapping[str, Any]) -> tuple[str, ...]:
    """The keys of a step's `depends_on`: a key, a list of keys or of `{step: KEY}`."""
    value = fields.get("depends_on")
    found: list[str] = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, Mapping):
            item = item.get("step")
        if isinstance(item, str) and item.strip():
            found.append(item.strip())
    return tuple(found)


def _key(fields: Mapping[str, Any]) -> str:
    value = fields.get("key")
    return value.strip() if isinstance(value, str) else ""


def _entries(documents: Iterable[Any]) -> list[_Entry]:
    """Every step and group of every document, each before its children."""
    entries: list[_Entry] = []

    def walk(
        nodes: Iterable[model.Node], outer: tuple[int, ...], inherited: tuple[str, ...]
    ) -> None:
        for node in nodes:
            if isinstance(node, model.Shorthand):
                continue
            index = len(entries)
            own = depends_keys(node.fields)
            entries.append(_Entry(step_name(node.fields), _key(node.fields), own, inherited, outer))
            if outer:
                entries[outer[-1]].children.append(index)
            if isinstance(node, model.Group):
                walk(node.steps, (*outer, index), (*inherited, *own))

    for document in documents:
        walk(model.parse(document).steps or (), (), ())
    return entries


def problems(documents: Iterable[Any], source: str) -> list[str]:
    """Duplicate keys, self-references and `depends_on` cycles, one line each."""
    entries = _entries(documents)
    where = f"{source}: " if source else ""
    found: list[str] = []
    owner: dict[str, int] = {}
    for index, entry in enumerate(entries):
        first = owner.setdefault(entry.key, index) if entry.key else index
        if first != index:
            found.append(
                f"{where}step {entry.name}: key {entry.key!r} is already the key of "
                f"step {entries[first].name}; Buildkite refuses a key used twice"
            )
    # Who waits for whom: an entry for the entries of the keys it names, a group for its steps.
    edges: dict[int, list[int]] = {i: list(e.children) for i, e in enumerate(entries)}
    for index, entry in enumerate(entries):
        enclosing = {entries[i].key: i for i in entry.outer if entries[i].key}
        for key in dict.fromkeys((*entry.inherited, *entry.own)):
            if key == entry.key or key in enclosing:
                if key in entry.own:  # (a group that names itself is told once, by the group)
                    whom = "itself" if key == entry.key else "the group it is in"
                    found.append(
                        f"{where}step {entry.name}: depends_on {key!r}, {whom}; it can never start"
                    )
            elif key in owner:
                edges[index].append(owner[key])
    for cycle in _cycles(edges):
        chain = " → ".join(entries[i].key or entries[i].name for i in (*cycle, cycle[0]))
        names = ", ".join(entries[i].name for i in cycle)
        found.append(f"{where}depends_on cycle: {chain} (steps {names}); none of them can start")
    return found


def strongly_connected(edges: Mapping[N, Sequence[N]]) -> list[list[N]]:
    """Every strongly connected part of more than one node, each sorted, in sorted order:
    Tarjan's algorithm, iterative (a deep chain is no recursion). Every node is a key."""
    index_of: dict[N, int] = {}
    low: dict[N, int] = {}
    on_stack: set[N] = set()
    stack: list[N] = []
    parts: list[list[N]] = []
    for root in edges:
        if root in index_of:
            continue
        work = [(root, 0)]
        while work:
            node, at = work.pop()
            if at == 0:
                index_of[node] = low[node] = len(index_of)
                stack.append(node)
                on_stack.add(node)
            targets = edges[node]
            if at < len(targets):
                work.append((node, at + 1))
                target = targets[at]
                if target not in index_of:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index_of[target])
                continue
            if low[node] == index_of[node]:
                part: list[N] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    parts.append(sorted(part))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(parts)


def _cycles(edges: Mapping[int, list[int]]) -> Iterator[tuple[int, ...]]:
    """One cycle (in document order from its first entry) per strongly connected part of
    more than one entry."""
    for part in strongly_connected(edges):
        yield _path(edges, set(part), part[0])


def _path(edges: Mapping[int, list[int]], members: set[int], start: int) -> tuple[int, ...]:
    """A shortest way from `start` back to itself inside `members` (breadth first)."""
    came: dict[int, int] = {}
    frontier = [start]
    while frontier:
        following: list[int] = []
        for node in frontier:
            for target in edges[node]:
                if target not in members:
                    continue
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came[path[-1]])
                    return tuple(reversed(path))
                if target not in came:
                    came[target] = node
                    following.append(target)
        frontier = following
    return (start,)
