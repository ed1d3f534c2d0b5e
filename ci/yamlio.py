"""YAML in and out, with libyaml's C loader/dumper when present (pipelines are big).

The one loader for every YAML a task reads. The composed node graph is checked
before a document is built, one error line per problem, naming the file:

* aliases may add at most `ALIAS_NODES` nodes to the expanded tree (a 1 KB
  "billion laughs" file is 10^9 nodes), and may not point into their own node;
* no mapping holds a key twice (PyYAML silently keeps the last); `<<` is fine;
* nesting is at most `MAX_DEPTH` deep (libyaml's composer crashes the process
  on ~30,000 levels, so a text that could nest that deep is measured first);
* an integer is written in at most `MAX_INT_CHARS` characters: Python refuses to
  convert more than 4,300 decimal digits (ValueError), and a longer hex or binary
  number would be built, then fail wherever it is printed.

A scalar its tag's constructor cannot build (`2001-13-45`, `!!int abc`, `!!bool
maybe`) is one `invalid YAML` line naming the place, never the constructor's
ValueError or KeyError.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from ci.errors import Failure
from ci.pipeline import files

# Nodes that aliases may add to the expanded tree, beyond those written in the file.
# The vLLM-Omni corpus adds at most ~500 (the source-dependency registry's anchors).
ALIAS_NODES = 100_000
MAX_DEPTH = 100
# 1,000 characters of any base (hex: ~1,200 decimal digits) stay far below Python's
# 4,300-digit conversion limit; no pipeline field needs a number of more than 20.
MAX_INT_CHARS = 1_000
# Each nesting level needs one of these characters, so a text with fewer of them
# cannot nest deep enough to crash libyaml's composer (which recurses in C).
_INDICATORS = "[{-?:"
_COMPOSER_SAFE = 5_000
_MERGE = "tag:yaml.org,2002:merge"
_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_INT = "tag:yaml.org,2002:int"
_TAGS = "tag:yaml.org,2002:"
# What PyYAML's scalar constructors raise on text their tag does not fit.
_BUILD_ERRORS = (ValueError, LookupError, AttributeError, TypeError, OverflowError)


class InvalidYAML(Failure):
    """Text that is not YAML at all (exit 1, as every problem of a file the loader reads);
    a caller whose spec words that error itself catches it."""


@cache
def _fast(kind: str) -> Any:
    """The safe `kind` ("Loader" or "Dumper"), libyaml's when present, minus PyYAML's
    per-node Python work (a scalar's tag depends only on its text: remembered; no path
    tracking); dicts, lists and strings dump the short way. Same documents, same text."""
    import yaml

    dumper = kind == "Dumper"
    base = getattr(yaml, f"CSafe{kind}", getattr(yaml, f"Safe{kind}"))
    tag_of = lru_cache(maxsize=1 << 16)(yaml.resolver.Resolver().resolve)

    def no_path(self: Any, *_args: Any) -> None:
        """Safe loaders and dumpers have no path resolvers: nothing to track."""

    body: dict[str, Any] = {"descend_resolver": no_path, "ascend_resolver": no_path}
    if not dumper:  # called straight from C: no Python frame on a remembered tag
        body["resolve"] = staticmethod(tag_of)
    else:  # a dumper asks about collections with their (unhashable) items
        scalar, defaults = yaml.ScalarNode, {yaml.SequenceNode: _SEQ, yaml.MappingNode: _MAP}

        def resolve(self: Any, kind: Any, value: Any, implicit: Any) -> str:
            if kind is not scalar:
                return defaults[kind]
            # Only a plain scalar's text is matched against the implicit tags.
            return tag_of(kind, value, (True, False)) if implicit[0] else _STR

        body |= {"resolve": resolve, "represent_data": _represent_data}
    return type(f"Fast{base.__name__}", (base,), body)


def _represent_data(self: Any, data: Any) -> Any:
    """A dict, list or string as SafeRepresenter makes it in block style; others as it does."""
    import yaml

    kind, scalar = data.__class__, yaml.ScalarNode
    if kind is str:
        return scalar(_STR, data)
    if kind is not dict and kind is not list:
        return yaml.SafeDumper.represent_data(self, data)
    node = self.represented_objects.get(id(data))
    if node is not None:  # the same object again: the emitter writes an anchor and alias
        return node
    self.object_keeper.append(data)
    children: list[Any] = []
    if kind is dict:
        node = yaml.MappingNode(_MAP, children, flow_style=False)
        self.represented_objects[id(data)] = node
        for key, value in data.items():  # strings inline: most keys and values are
            k = scalar(_STR, key) if key.__class__ is str else self.represent_data(key)
            v = scalar(_STR, value) if value.__class__ is str else self.represent_data(value)
            children.append((k, v))
    else:
        node = yaml.SequenceNode(_SEQ, children, flow_style=False)
        self.represented_objects[id(data)] = node
        children.extend(
            scalar(_STR, i) if i.__class__ is str else self.represent_data(i) for i in data
        )
    return node


def _construct(loader: Any, root: Any) -> Any:
    """The document of `root` as the safe constructor builds it: plain maps, lists and strings
    here, the rest by the constructor on the same memo (an alias is the object it names)."""
    import yaml

    scalar, mapping, sequence = yaml.ScalarNode, yaml.MappingNode, yaml.SequenceNode
    built = loader.constructed_objects

    def build(node: Any) -> Any:
        cls = node.__class__
        if cls is scalar and node.tag == _STR:
            return node.value
        found = built.get(node)
        if found is not None:
            return found
        pairs = node.value
        plain_keys = cls is mapping and all(
            k.__class__ is scalar and k.tag == _STR for k, _ in pairs
        )
        if plain_keys and node.tag == _MAP:
            out: dict[str, Any] = {}
            built[node] = out  # before the children: an alias inside is this very dict
            out.update((k.value, build(v)) for k, v in pairs)
            return out
        if cls is sequence and node.tag == _SEQ:
            items: list[Any] = []
            built[node] = items
            items.extend(map(build, pairs))
            return items
        return loader.construct_object(node, deep=True)

    return build(root)


def loads(text: str, *, source: str = "<string>") -> Any:
    """The single document of `text` (None when empty); problems name `source`, exit 1."""
    documents = _documents(text, source, single=True)
    return documents[0] if documents else None


def loads_all(text: str, *, source: str = "<string>") -> list[Any]:
    """Every document of `text`, in order (an empty document is None)."""
    return _documents(text, source, single=False)


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """A load or a dump makes tens of thousands of nodes and containers, none in a cycle:
    the cycle collector would only walk them again and again (a sixth of a load)."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()


@_without_cycle_collection()
def _documents(text: str, source: str, *, single: bool) -> list[Any]:
    import yaml

    loader = _fast("Loader")(text)
    try:
        if sum(text.count(c) for c in _INDICATORS) > _COMPOSER_SAFE:
            _check_depth(text, source)
        if single:
            node = loader.get_single_node()
            nodes = [] if node is None else [node]
        else:
            nodes = []
            while loader.check_node():
                nodes.append(loader.get_node())
        Failure.collect(p for n in nodes for p in _problems(loader, n, source))
        try:
            documents = [_construct(loader, n) for n in nodes]
        except _BUILD_ERRORS as exc:
            raise InvalidYAML(f"{source}: invalid YAML{_unbuildable(nodes, exc)}") from None
    except yaml.YAMLError as exc:
        if "nesting depth" in str(getattr(exc, "problem", "") or ""):
            # libyaml 0.2.5+ stops at 1,000 levels itself, while scanning ahead of the
            # events _check_depth reads: the same refusal, in the same words.
            mark = getattr(exc, "problem_mark", None)
            line = getattr(mark, "line", 0) + 1
            raise Failure(f"{source}: {_too_deep(line)}") from None
        raise InvalidYAML(f"{source}: invalid YAML{_where(exc)}") from None
    finally:
        loader.dispose()
    return documents


def _check_depth(text: str, source: str) -> None:
    """Refuse deep nesting from the event stream, before libyaml's composer recurses."""
    import yaml

    starts = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
    ends = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    depth = 0
    for event in yaml.parse(text, Loader=_fast("Loader")):
        if isinstance(event, starts):
            depth += 1
            if depth > MAX_DEPTH:
                line = getattr(event.start_mark, "line", 0) + 1
                raise Failure(f"{source}: {_too_deep(line)}")
        elif isinstance(event, ends):
            depth -= 1


def _too_deep(line: int) -> str:
    return f"YAML nested deeper than {MAX_DEPTH} levels (at line {line})"


class _Refused(Exception):
    """A document the walk stops at: recursive aliases, or nesting past MAX_DEPTH."""


def _problems(loader: Any, root: Any, source: str) -> list[str]:
    """Alias expansion, recursion, depth and duplicate keys of one composed document: one
    pass over the distinct collections (an alias measured once), cut at MAX_DEPTH."""
    import yaml

    mapping, scalar = yaml.MappingNode, yaml.ScalarNode
    chain = itertools.chain.from_iterable
    size: dict[int, int] = {}  # id(collection) -> nodes of its expanded subtree
    height: dict[int, int] = {}  # id(collection) -> levels of collections in it
    open_nodes: set[int] = set()
    problems: list[str] = []
    written = 0  # nodes in the text (a scalar alias shared by two collections counts twice)

    def visit(node: Any, depth: int) -> None:
        nonlocal written
        key = id(node)
        if key in open_nodes:
            line = node.start_mark.line + 1
            raise _Refused(f"a YAML alias refers to the node that contains it (line {line})")
        if depth > MAX_DEPTH:
            raise _Refused(_too_deep(node.start_mark.line + 1))
        open_nodes.add(key)
        if node.__class__ is mapping:
            pairs = node.value
            plain = {k.value for k, _ in pairs if k.__class__ is scalar and k.tag == _STR}
            if len(plain) < len(pairs):  # not all distinct plain string keys: look closer
                problems.extend(_duplicates(loader, node, source))
            children: Any = chain(pairs)
        else:
            children = node.value
        total, tallest, scalars = 1, 0, 0
        for child in children:
            if child.__class__ is scalar:
                scalars += 1
                # The length first: a cheap test that almost every scalar fails.
                if len(child.value) > MAX_INT_CHARS and child.tag == _INT:
                    problems.append(f"{source}: {_long_int(child)}")
                continue
            inner = id(child)
            if inner not in size:
                visit(child, depth + 1)
            total += size[inner]
            tallest = max(tallest, height[inner])
        written += 1 + scalars
        size[key], height[key] = total + scalars, tallest + 1
        open_nodes.discard(key)

    if root.__class__ is scalar:
        long = len(root.value) > MAX_INT_CHARS and root.tag == _INT
        return [f"{source}: {_long_int(root)}"] if long else []
    try:
        visit(root, 1)
    except _Refused as exc:
        return [f"{source}: {exc}"]
    if size[id(root)] > written + ALIAS_NODES:
        problems.append(
            f"{source}: YAML aliases expand {written:,} written nodes to {size[id(root)]:,} "
            f"(at most {ALIAS_NODES:,} more are allowed); refusing an alias bomb"
        )
    elif height[id(root)] > MAX_DEPTH:  # deep through an alias to a node measured earlier
        problems.append(f"{source}: {_too_deep(root.start_mark.line + 1)}")
    return problems


def _duplicates(loader: Any, node: Any, source: str) -> list[str]:
    """Keys given twice in one mapping: `1` and `true` count, as Python's dict merges them."""
    import yaml

    seen: dict[Any, int] = {}
    found: list[str] = []
    for key_node, _value in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE:
            continue
        try:
            key = key_node.value if key_node.tag == _STR else loader.construct_object(key_node)
            first = seen.get(key)
        except _BUILD_ERRORS:  # unhashable or unbuildable: the constructor reports it
            loader.recursive_objects.pop(key_node, None)  # left there by the failed build
            continue
        line = key_node.start_mark.line + 1
        if first is None:
            seen[key] = line
        else:
            found.append(
                f"{source}: duplicate key {key_node.value!r} at line {line}, "
                f"column {key_node.start_mark.column + 1} (first at line {first})"
            )
    return found


def _long_int(node: Any) -> str:
    mark = node.start_mark
    return (
        f"a YAML integer of {len(node.value):,} characters at line {mark.line + 1}, column "
        f"{mark.column + 1} (at most {MAX_INT_CHARS:,}; quote it to keep it as text)"
    )


def _unbuildable(nodes: list[Any], error: BaseException) -> str:
    """` at line L, column C: ...` for the first scalar its tag's constructor cannot build
    (the constructor's own error, unlocated, when none is found alone)."""
    import yaml

    constructor = yaml.constructor.SafeConstructor()
    seen: set[int] = set()
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if node.tag == _STR:
                continue
            try:
                constructor.construct_object(node, deep=True)
            except _BUILD_ERRORS as exc:
                mark, tag = node.start_mark, node.tag.replace(_TAGS, "!!", 1)
                why = f" ({exc})" if isinstance(exc, ValueError) else ""
                shown = node.value if len(node.value) <= 40 else node.value[:40] + "…"
                where = f" at line {mark.line + 1}, column {mark.column + 1}"
                return f"{where}: cannot read {shown!r} as {tag}{why}"
        elif isinstance(node, yaml.MappingNode):
            stack.extend(reversed([n for pair in node.value for n in pair]))
        else:
            stack.extend(reversed(node.value))
    return ": " + " ".join(f"{type(error).__name__}: {error}".split())


def _where(exc: Any) -> str:
    """One line for a YAML error: `at line L, column C: problem` (PyYAML's text spans lines)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or not problem:
        return ": " + " ".join(str(exc).split())
    return f" at line {mark.line + 1}, column {mark.column + 1}: {problem}"


def load(path: str | Path) -> Any:
    p = Path(path)
    return loads(files.read_text(p, str(p)), source=str(p))


def load_all(path: str | Path, source: str) -> list[Any]:
    return loads_all(files.read_text(Path(path), source), source=source)


@_without_cycle_collection()
def dumps(data: Any) -> str:
    import yaml

    return str(
        yaml.dump(
            data,
            Dumper=_fast("Dumper"),
            sort_keys=False,
            default_flow_style=False,
            allow_unicode=True,
            width=1 << 20,
        )
    )
